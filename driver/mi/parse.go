package mi

import (
	"bytes"
	"fmt"
	"strings"
)

// maxDepth bounds the nesting of tuples and lists so that a hostile line
// such as "^done,a=[[[[..." cannot exhaust the stack. gdb's deepest output
// (a -var-list-children of nested structs) stays far below it.
const maxDepth = 512

// SyntaxError reports a line that is not a well-formed MI record.
type SyntaxError struct {
	Offset int    // byte offset in the line where parsing failed
	Msg    string // what was expected
	Line   string // the line, shortened to 200 bytes
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("mi: malformed record at byte %d: %s: %q", e.Offset, e.Msg, e.Line)
}

// ParseRecord parses one line of gdb's MI output, without its line end,
// following the grammar of the GDB manual ("GDB/MI Output Syntax"):
//
//	result-record  = [token] "^" class ("," result)*
//	async-record   = [token] ("*" | "+" | "=") class ("," result)*
//	stream-record  = ("~" | "@" | "&") c-string
//	prompt         = "(gdb)"
//	result         = variable "=" value
//	value          = c-string | tuple | list
//	tuple          = "{}" | "{" result ("," result)* "}"
//	list           = "[]" | "[" value ("," value)* "]" | "[" result ("," result)* "]"
//
// One deviation of gdb's is accepted: in mi2, a multi-location breakpoint
// prints its locations as bare tuples after the breakpoint's own result
// (`bkpt={number="1",...},{number="1.1",...}`). A value without a name is
// filed under the name of the result before it, so Value.All("bkpt")
// returns all of them. A malformed line returns a *SyntaxError; ParseRecord
// never panics.
func ParseRecord(line []byte) (*Record, error) {
	line = bytes.TrimSuffix(line, []byte("\r"))
	p := &parser{buf: line}
	rec, err := p.record()
	if err != nil {
		return nil, err
	}
	return rec, nil
}

type parser struct {
	buf   []byte
	pos   int
	depth int
}

func (p *parser) fail(format string, args ...any) error {
	line := p.buf
	if len(line) > 200 {
		line = line[:200]
	}
	return &SyntaxError{Offset: p.pos, Msg: fmt.Sprintf(format, args...), Line: string(line)}
}

func (p *parser) peek() (byte, bool) {
	if p.pos >= len(p.buf) {
		return 0, false
	}
	return p.buf[p.pos], true
}

func (p *parser) record() (*Record, error) {
	if isPrompt(p.buf) {
		return &Record{Type: TypePrompt}, nil
	}
	start := p.pos
	for p.pos < len(p.buf) && isDigit(p.buf[p.pos]) {
		p.pos++
	}
	token := string(p.buf[start:p.pos])
	c, ok := p.peek()
	if !ok {
		return nil, p.fail("empty record")
	}
	t := Type(c)
	switch {
	case t == TypeResult || t.IsAsync():
		p.pos++
		class := p.word()
		if class == "" {
			return nil, p.fail("expected a record class")
		}
		rec := &Record{Type: t, Token: token, Class: class}
		fields, err := p.results()
		if err != nil {
			return nil, err
		}
		rec.Results = &Value{kind: KindTuple, fields: fields}
		return rec, nil
	case t.IsStream():
		if token != "" {
			return nil, p.fail("a stream record cannot carry a token")
		}
		p.pos++
		s, err := p.cstring()
		if err != nil {
			return nil, err
		}
		if p.pos != len(p.buf) {
			return nil, p.fail("unexpected text after the stream's string")
		}
		return &Record{Type: t, Text: s}, nil
	}
	return nil, p.fail("unknown record type %q", c)
}

// isPrompt accepts "(gdb)" with the trailing blank gdb prints after it.
func isPrompt(line []byte) bool {
	return bytes.Equal(bytes.TrimRight(line, " "), []byte("(gdb)"))
}

// results parses the ("," result)* tail of a result or async record.
func (p *parser) results() ([]Field, error) {
	var fields []Field
	for p.pos < len(p.buf) {
		if p.buf[p.pos] != ',' {
			return nil, p.fail("expected ',' or end of line")
		}
		p.pos++
		f, err := p.element(fields, true)
		if err != nil {
			return nil, err
		}
		fields = append(fields, f)
	}
	return fields, nil
}

// element parses a result (name=value) or, where gdb prints one after a
// result, a bare value that continues the previous result's name.
func (p *parser) element(prev []Field, inTuple bool) (Field, error) {
	c, ok := p.peek()
	if !ok {
		return Field{}, p.fail("expected a result")
	}
	if c == '{' || c == '[' || c == '"' {
		if inTuple {
			if len(prev) == 0 || prev[len(prev)-1].Name == "" {
				return Field{}, p.fail("expected name=value")
			}
		}
		v, err := p.value()
		if err != nil {
			return Field{}, err
		}
		name := ""
		if inTuple {
			name = prev[len(prev)-1].Name
		}
		return Field{Name: name, Value: v}, nil
	}
	name := p.word()
	if name == "" {
		return Field{}, p.fail("expected a variable name")
	}
	if c, ok := p.peek(); !ok || c != '=' {
		return Field{}, p.fail("expected '=' after %q", name)
	}
	p.pos++
	v, err := p.value()
	if err != nil {
		return Field{}, err
	}
	return Field{Name: name, Value: v}, nil
}

// word reads a variable or class name: everything up to a delimiter, a
// blank or a control character.
func (p *parser) word() string {
	start := p.pos
	for p.pos < len(p.buf) {
		switch c := p.buf[p.pos]; {
		case c <= ' ', c == 0x7f, c == '=', c == ',', c == '{', c == '}', c == '[', c == ']', c == '"':
			return string(p.buf[start:p.pos])
		}
		p.pos++
	}
	return string(p.buf[start:p.pos])
}

func (p *parser) value() (*Value, error) {
	c, ok := p.peek()
	if !ok {
		return nil, p.fail("expected a value")
	}
	switch c {
	case '"':
		s, err := p.cstring()
		if err != nil {
			return nil, err
		}
		return &Value{kind: KindConst, str: s}, nil
	case '{':
		return p.compound(KindTuple, '}')
	case '[':
		return p.compound(KindList, ']')
	}
	return nil, p.fail("expected a value, found %q", c)
}

// compound parses a tuple or a list after its opening bracket.
func (p *parser) compound(kind Kind, closer byte) (*Value, error) {
	if p.depth >= maxDepth {
		return nil, p.fail("values nested deeper than %d", maxDepth)
	}
	p.depth++
	defer func() { p.depth-- }()
	p.pos++ // the opening bracket
	v := &Value{kind: kind}
	if c, ok := p.peek(); ok && c == closer {
		p.pos++
		return v, nil
	}
	for {
		f, err := p.element(v.fields, kind == KindTuple)
		if err != nil {
			return nil, err
		}
		v.fields = append(v.fields, f)
		c, ok := p.peek()
		if !ok {
			return nil, p.fail("unterminated %s", kind)
		}
		p.pos++
		if c == closer {
			return v, nil
		}
		if c != ',' {
			p.pos--
			return nil, p.fail("expected ',' or %q in %s", closer, kind)
		}
	}
}

// cstring decodes a C string literal starting at the opening quote. It
// understands every C escape: \n \t \r \a \b \f \v \\ \" \' \?, gdb's \e
// for ESC, octal (\303\251 is the UTF-8 encoding of é) and \xHH. An unknown
// escape keeps the escaped character, as C compilers do.
func (p *parser) cstring() (string, error) {
	if c, ok := p.peek(); !ok || c != '"' {
		return "", p.fail("expected '\"'")
	}
	p.pos++
	start := p.pos
	// Fast path: no escapes.
	for p.pos < len(p.buf) {
		c := p.buf[p.pos]
		if c == '"' {
			s := string(p.buf[start:p.pos])
			p.pos++
			return s, nil
		}
		if c == '\\' {
			break
		}
		p.pos++
	}
	out := append([]byte(nil), p.buf[start:p.pos]...)
	for p.pos < len(p.buf) {
		c := p.buf[p.pos]
		switch c {
		case '"':
			p.pos++
			return string(out), nil
		case '\\':
			p.pos++
			if p.pos >= len(p.buf) {
				return "", p.fail("unterminated escape")
			}
			e := p.buf[p.pos]
			p.pos++
			switch e {
			case 'n':
				out = append(out, '\n')
			case 't':
				out = append(out, '\t')
			case 'r':
				out = append(out, '\r')
			case 'a':
				out = append(out, '\a')
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'v':
				out = append(out, '\v')
			case 'e':
				out = append(out, 0x1b)
			case '0', '1', '2', '3', '4', '5', '6', '7':
				n := int(e - '0')
				for i := 0; i < 2 && p.pos < len(p.buf) && isOctal(p.buf[p.pos]); i++ {
					n = n*8 + int(p.buf[p.pos]-'0')
					p.pos++
				}
				out = append(out, byte(n)) // \777 wraps, as in C
			case 'x':
				n, digits := 0, 0
				for p.pos < len(p.buf) && digits < 2 {
					d, ok := hexVal(p.buf[p.pos])
					if !ok {
						break
					}
					n = n*16 + d
					p.pos++
					digits++
				}
				if digits == 0 {
					out = append(out, 'x')
				} else {
					out = append(out, byte(n))
				}
			default:
				out = append(out, e)
			}
		default:
			out = append(out, c)
			p.pos++
		}
	}
	return "", p.fail("unterminated string")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isOctal(c byte) bool { return '0' <= c && c <= '7' }

func hexVal(c byte) (int, bool) {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0'), true
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10, true
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10, true
	}
	return 0, false
}

// Word returns s as one word of an MI command: as it is when gdb's MI
// argument splitter reads it back unchanged (main, leak.c:15, *0x401136),
// else quoted as Quote quotes it.
func Word(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n\r\v\f\"\\'") {
		return Quote(s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] == 0x7f {
			return Quote(s)
		}
	}
	return s
}

// Quote returns s as an MI c-string, ready to be passed as one argument of
// a command: a breakpoint condition, a CLI command for -interpreter-exec,
// a path with blanks. Quotes and backslashes are escaped, control bytes and
// DEL become octal escapes; other bytes, UTF-8 included, pass unchanged, so
// gdb reads back exactly s.
func Quote(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			if c < 0x20 || c == 0x7f {
				b = append(b, '\\', '0'+c>>6, '0'+(c>>3)&7, '0'+c&7)
			} else {
				b = append(b, c)
			}
		}
	}
	b = append(b, '"')
	return string(b)
}
