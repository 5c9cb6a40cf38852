package snapshots

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// separator is the line massif writes before and after every snapshot=N.
const separator = "#-----------"

// MaxLineLength bounds one line of a massif file. massif's longest lines
// name a function, which even for deep C++ templates stays far below; a
// file without newlines (/dev/zero behind a pipe, a binary file) is
// refused there instead of filling memory.
const MaxLineLength = 4 << 20

// ReadOptions tunes a Reader.
type ReadOptions struct {
	// TotalsOnly skips the allocation trees: snapshots come back with their
	// totals and Kind but a nil Tree, and tree lines are not checked. It is
	// the fast path for callers that only list or plot totals.
	TotalsOnly bool
}

// Reader reads the snapshots of one massif file one at a time, so that the
// memory it needs is proportional to one snapshot, not to the file.
//
//	r := snapshots.NewReader(f, "massif.out.42", snapshots.ReadOptions{})
//	for {
//		s, err := r.Next()
//		if err == io.EOF {
//			break
//		}
//		...
//	}
//
// The header lines (desc:, cmd:, time_unit:) are collected into Header as
// they are met; valgrind writes them first, heaptrack's exporter last, so
// Header is complete only once Next has returned io.EOF.
type Reader struct {
	name string
	opts ReadOptions
	br   *bufio.Reader
	line int    // number of the line last returned by readLine
	long []byte // holds a line longer than br's buffer
	eof  bool
	// sniffed is set once the first bytes were checked for gzip's magic
	// (see unzip).
	sniffed bool

	// unread makes the next readLine return the current line again.
	unread  bool
	current []byte

	header File
	// cont is the header field the last line went to: valgrind writes
	// the command as it was given, so a newline in the program's path
	// or an argument continues the cmd: line on the next one.
	cont   *string
	blanks int   // blank lines since the last line of cont
	count  int   // snapshots returned so far
	err    error // sticky: once Next fails it keeps failing

	frames  frameTable  // every frame text seen
	visitor treeVisitor // if set, gets tree lines instead of s.Tree
	tree    treeBuilder
}

// NewReader returns a Reader of the massif file in r; name is used in error
// messages and as File.Name. A gzip-compressed file (as snapctl run keeps
// its snapshots) is read as the file it holds, whatever its name: it is
// told by gzip's magic bytes.
func NewReader(r io.Reader, name string, opts ReadOptions) *Reader {
	return &Reader{
		name:   name,
		opts:   opts,
		br:     bufio.NewReaderSize(r, 16<<10),
		header: File{Name: name},
	}
}

// Header returns the file's name and header fields read so far, with no
// snapshots.
func (r *Reader) Header() *File {
	h := r.header
	return &h
}

// Next returns the next snapshot, or io.EOF after the last one. Any other
// error is a *FormatError or a read error and is returned again by every
// later call.
func (r *Reader) Next() (*Snapshot, error) {
	if r.err != nil {
		return nil, r.err
	}
	s, err := r.next()
	if err != nil {
		r.err = err
		return nil, err
	}
	r.count++
	return s, nil
}

func (r *Reader) next() (*Snapshot, error) {
	for {
		line, err := r.readLine()
		if err == io.EOF {
			if r.count == 0 {
				return nil, r.errorf(r.line+1, `expected "snapshot=", got end of file`)
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		cont := r.cont
		r.cont = nil
		switch {
		case len(line) == 0:
			// Tolerate blank lines between sections; within a command,
			// they are its own if a line of it follows.
			if cont != nil {
				r.cont, r.blanks = cont, r.blanks+1
			}
		case bytes.Equal(line, []byte(separator)):
			return r.snapshot()
		case r.headerLine(line):
		case cont != nil && r.count == 0:
			*cont += strings.Repeat("\n", r.blanks+1) + string(line)
			r.cont, r.blanks = cont, 0
		case isTreeLine(line) && r.count > 0:
			return nil, r.errorf(r.line, `expected %q, got %s (more tree lines than the "nK:" counts announce)`, separator, quoteLine(line))
		default:
			return nil, r.errorf(r.line, `expected %q or a "desc:", "cmd:" or "time_unit:" line, got %s`, separator, quoteLine(line))
		}
	}
}

// headerLine records a desc:, cmd: or time_unit: line and reports whether
// line was one.
func (r *Reader) headerLine(line []byte) bool {
	for _, h := range [...]struct {
		prefix string
		field  *string
	}{
		{"desc:", &r.header.Desc},
		{"cmd:", &r.header.Cmd},
		{"time_unit:", &r.header.TimeUnit},
	} {
		if v, ok := bytes.CutPrefix(line, []byte(h.prefix)); ok {
			*h.field = string(bytes.TrimPrefix(v, []byte(" ")))
			r.blanks = 0
			if h.prefix != "time_unit:" {
				r.cont = h.field
			}
			return true
		}
	}
	return false
}

// snapshot reads one snapshot after its opening separator.
func (r *Reader) snapshot() (*Snapshot, error) {
	s := &Snapshot{}
	v, err := r.field("snapshot=")
	if err != nil {
		return nil, err
	}
	s.Line = r.line
	n, ok := parseInt(v)
	if !ok || n > 1<<31 {
		return nil, r.errorf(r.line, "expected a snapshot number, got %s", quoteLine(v))
	}
	s.Index = int(n)
	line, err := r.readLine()
	if err != nil || !bytes.Equal(line, []byte(separator)) {
		return nil, r.expected(separator, line, err)
	}
	if v, err = r.field("time="); err != nil {
		return nil, err
	}
	s.Time, ok = parseInt(v)
	if !ok {
		// heaptrack writes seconds with a fraction: time=0.001.
		f, ferr := strconv.ParseFloat(string(v), 64)
		if ferr != nil || !(f >= 0 && f <= 1<<62) { // also rejects NaN
			return nil, r.errorf(r.line, "expected a time, got %s", quoteLine(v))
		}
		s.Time = int64(f)
		s.TimeText = string(v)
	}
	for _, f := range [...]struct {
		key string
		dst *int64
	}{
		{"mem_heap_B=", &s.HeapBytes},
		{"mem_heap_extra_B=", &s.HeapExtraBytes},
		{"mem_stacks_B=", &s.StacksBytes},
	} {
		if v, err = r.field(f.key); err != nil {
			return nil, err
		}
		if *f.dst, ok = parseInt(v); !ok {
			return nil, r.errorf(r.line, "expected a byte count after %q, got %s", f.key, quoteLine(v))
		}
		if *f.dst > MaxBytes {
			return nil, r.errorf(r.line, "%s%d is more than any 64-bit address space holds (%d bytes)", f.key, *f.dst, int64(MaxBytes))
		}
	}
	if v, err = r.field("heap_tree="); err != nil {
		return nil, err
	}
	switch string(v) {
	case "empty":
		s.Kind = TreeEmpty
		return s, nil
	case "detailed":
		s.Kind = TreeDetailed
	case "peak":
		s.Kind = TreePeak
	default:
		return nil, r.errorf(r.line, `expected "detailed", "peak" or "empty" after "heap_tree=", got %s`, quoteLine(v))
	}
	if r.opts.TotalsOnly {
		return s, r.skipTree()
	}
	if err := r.readTree(s); err != nil {
		return nil, err
	}
	return s, nil
}

// field reads the next line, which must start with key, and returns the
// rest of it.
func (r *Reader) field(key string) ([]byte, error) {
	line, err := r.readLine()
	if err != nil {
		return nil, r.expected(key, line, err)
	}
	v, ok := bytes.CutPrefix(line, []byte(key))
	if !ok {
		return nil, r.expected(key, line, nil)
	}
	return v, nil
}

// expected builds the error for a line that is not what the format
// requires; err is the read error, io.EOF for a truncated file.
func (r *Reader) expected(what string, line []byte, err error) error {
	if err == io.EOF {
		return r.errorf(r.line+1, "expected %q, got end of file", what)
	}
	if err != nil {
		return err
	}
	return r.errorf(r.line, "expected %q, got %s", what, quoteLine(line))
}

func (r *Reader) errorf(line int, format string, args ...any) error {
	return &FormatError{File: r.name, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// skipTree consumes the tree lines of a snapshot without building nodes.
func (r *Reader) skipTree() error {
	for {
		line, err := r.readLine()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if !isTreeLine(line) {
			r.unread = true
			return nil
		}
	}
}

// readLine returns the next line without its line ending. The slice is valid
// until the next call. It returns io.EOF only when no bytes are left.
func (r *Reader) readLine() ([]byte, error) {
	if r.unread {
		r.unread = false
		return r.current, nil
	}
	if r.eof {
		return nil, io.EOF
	}
	if !r.sniffed {
		r.sniffed = true
		if err := r.unzip(); err != nil {
			return nil, err
		}
	}
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		r.long = append(r.long[:0], line...)
		for err == bufio.ErrBufferFull {
			if len(r.long) > MaxLineLength {
				return nil, r.errorf(r.line+1, "a line longer than %d MiB: not a massif file", MaxLineLength>>20)
			}
			line, err = r.br.ReadSlice('\n')
			r.long = append(r.long, line...)
		}
		line = r.long
	}
	if err == io.EOF {
		r.eof = true
		if len(line) == 0 {
			return nil, io.EOF
		}
	} else if err != nil {
		return nil, fmt.Errorf("reading massif file %s: %w", r.name, err)
	}
	r.line++
	line = bytes.TrimSuffix(line, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	r.current = line
	return line, nil
}

// isTreeLine reports whether line looks like "   nK: ..." at any depth.
func isTreeLine(line []byte) bool {
	i := 0
	for i < len(line) && line[i] == ' ' {
		i++
	}
	return i+1 < len(line) && line[i] == 'n' && line[i+1] >= '0' && line[i+1] <= '9'
}

// MaxBytes is the largest byte count a massif file may give: 64 PiB, the
// user address space of a 64-bit machine with 5-level page tables. Nothing
// real comes near it, and the sums the diffs and series make of such
// counts stay far from int64's limit, where they would wrap around into
// nonsense; a larger count is a corrupt file, refused with its line.
const MaxBytes = 1 << 56

// parseInt parses a non-negative decimal integer without allocating.
func parseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Parse reads a whole massif file. name is used in error messages and as
// File.Name. A file with no snapshot at all is an error.
func Parse(r io.Reader, name string) (*File, error) {
	return parse(r, name, ReadOptions{})
}

// ParseTotals is Parse with ReadOptions.TotalsOnly: every snapshot's totals
// and Kind, no trees.
func ParseTotals(r io.Reader, name string) (*File, error) {
	return parse(r, name, ReadOptions{TotalsOnly: true})
}

func parse(r io.Reader, name string, opts ReadOptions) (*File, error) {
	rd := NewReader(r, name, opts)
	var snaps []*Snapshot
	for {
		s, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		snaps = append(snaps, s)
	}
	f := rd.Header()
	f.Snapshots = snaps
	return f, nil
}

// ParseFile reads the massif file at path.
func ParseFile(path string) (*File, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening massif file: %w", err)
	}
	defer fh.Close()
	return Parse(fh, path)
}

// ParseFunc reads the massif file in r one snapshot at a time and calls fn
// for each, so that only one snapshot is in memory at once. It returns the
// header (without snapshots) once the whole file is read. An error from fn
// stops the reading and is returned as is.
func ParseFunc(r io.Reader, name string, opts ReadOptions, fn func(*Snapshot) error) (*File, error) {
	rd := NewReader(r, name, opts)
	for {
		s, err := rd.Next()
		if err == io.EOF {
			return rd.Header(), nil
		}
		if err != nil {
			return nil, err
		}
		if err := fn(s); err != nil {
			return nil, err
		}
	}
}
