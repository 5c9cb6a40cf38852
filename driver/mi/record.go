package mi

import "strings"

// Type is the kind of an MI output record, named by the character that
// starts it.
type Type byte

// Record types. The first five carry a class and results, the next three
// carry text; Prompt is the "(gdb)" line that ends a group of records and
// Unparsed a line that is not MI at all.
const (
	TypeResult  Type = '^' // ^done, ^running, ^connected, ^error, ^exit
	TypeExec    Type = '*' // *running, *stopped: the target's execution state
	TypeStatus  Type = '+' // +download progress
	TypeNotify  Type = '=' // =thread-created, =breakpoint-modified, ...
	TypeConsole Type = '~' // console output: what the CLI would print
	TypeTarget  Type = '@' // target output; vgdb's monitor commands answer here
	TypeLog     Type = '&' // gdb's own log: echoed CLI commands, warnings
	TypePrompt  Type = '(' // (gdb)
	// TypeUnparsed marks a line that is not MI: output of a native inferior
	// that shares gdb's stdout, or a malformed line. Text holds the line
	// and Err says why it did not parse.
	TypeUnparsed Type = '?'
)

// String names the record type: "result", "exec", "console", ...
func (t Type) String() string {
	switch t {
	case TypeResult:
		return "result"
	case TypeExec:
		return "exec"
	case TypeStatus:
		return "status"
	case TypeNotify:
		return "notify"
	case TypeConsole:
		return "console"
	case TypeTarget:
		return "target"
	case TypeLog:
		return "log"
	case TypePrompt:
		return "prompt"
	case TypeUnparsed:
		return "unparsed"
	}
	return "invalid"
}

// IsAsync reports whether records of this type are async records (exec,
// status or notify).
func (t Type) IsAsync() bool { return t == TypeExec || t == TypeStatus || t == TypeNotify }

// IsStream reports whether records of this type are stream records
// (console, target or log).
func (t Type) IsStream() bool { return t == TypeConsole || t == TypeTarget || t == TypeLog }

// Record is one line of gdb's MI output.
type Record struct {
	Type Type
	// Token is the digits before a result or async record, "" when there
	// are none. A result carries the token of the command it answers.
	Token string
	// Class is "done", "stopped", "thread-created", ...; empty for stream,
	// prompt and unparsed records.
	Class string
	// Results is the tuple of the record's name=value results. It is an
	// empty tuple (never nil) for result and async records without results
	// and nil for the other types.
	Results *Value
	// Text is the decoded c-string of a stream record, or the raw line of
	// an unparsed one.
	Text string
	// Err is the parse error of an unparsed record.
	Err error
	// Seq is a record's place among those a Client queued for Events,
	// from 1 (Client.Queued); 0 for the others.
	Seq uint64
}

// String returns the constant at path in the record's results; see Value.
func (r *Record) String(path string) string { return r.Results.String(path) }

// Int returns the constant at path in the record's results as an int.
func (r *Record) Int(path string) (int, error) { return r.Results.Int(path) }

// Get returns the value at path in the record's results, or nil.
func (r *Record) Get(path string) *Value { return r.Results.Get(path) }

// MI returns the record in MI syntax, without the newline. Parsing it gives
// back an equal record.
func (r *Record) MI() string {
	var b strings.Builder
	switch {
	case r.Type == TypePrompt:
		return "(gdb)"
	case r.Type == TypeUnparsed:
		return r.Text
	case r.Type.IsStream():
		b.WriteByte(byte(r.Type))
		b.WriteString(Quote(r.Text))
	default:
		b.WriteString(r.Token)
		b.WriteByte(byte(r.Type))
		b.WriteString(r.Class)
		if r.Results.Len() > 0 {
			b.WriteByte(',')
			appendFields(&b, r.Results.fields)
		}
	}
	return b.String()
}

// Stream is one stream record that gdb printed while it ran a command.
type Stream struct {
	Type Type // TypeConsole, TypeTarget or TypeLog
	Text string
}

// Result is gdb's answer to one command: the result record and the stream
// records that arrived between sending the command and that record.
type Result struct {
	// Class is "done", "running", "connected" or "exit". A "^error" is not
	// a Result but an *Error.
	Class string
	// Results is the tuple of the result record's results, never nil.
	Results *Value
	// Streams are the command's console, target and log output in order.
	// Output of vgdb's monitor commands is target (@) text.
	Streams []Stream
}

// String returns the constant at path in the results; see Value.
func (r *Result) String(path string) string { return r.Results.String(path) }

// Int returns the constant at path in the results as an int.
func (r *Result) Int(path string) (int, error) { return r.Results.Int(path) }

// Get returns the value at path in the results, or nil.
func (r *Result) Get(path string) *Value { return r.Results.Get(path) }

// Tuple returns the tuple at path in the results, or nil.
func (r *Result) Tuple(path string) *Value { return r.Results.Tuple(path) }

// List returns the elements of the list at path in the results.
func (r *Result) List(path string) []*Value { return r.Results.List(path) }

// Console returns the concatenated console (~) text.
func (r *Result) Console() string { return r.streamText(TypeConsole) }

// Target returns the concatenated target (@) text: for a monitor command,
// what valgrind's gdbserver answered. An empty string means it printed
// nothing, which for `monitor detailed_snapshot` means success.
func (r *Result) Target() string { return r.streamText(TypeTarget) }

// Log returns the concatenated log (&) text.
func (r *Result) Log() string { return r.streamText(TypeLog) }

func (r *Result) streamText(t Type) string {
	var b strings.Builder
	for _, s := range r.Streams {
		if s.Type == t {
			b.WriteString(s.Text)
		}
	}
	return b.String()
}
