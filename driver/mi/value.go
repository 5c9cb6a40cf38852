package mi

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind says which of MI's three value forms a Value holds.
type Kind uint8

// The forms of an MI value (GDB manual, "GDB/MI Output Syntax").
const (
	KindConst Kind = iota + 1 // a c-string: "text"
	KindTuple                 // {name=value,...}
	KindList                  // [value,...] or [name=value,...]
)

// String names the kind: "const", "tuple" or "list".
func (k Kind) String() string {
	switch k {
	case KindConst:
		return "const"
	case KindTuple:
		return "tuple"
	case KindList:
		return "list"
	}
	return "invalid"
}

// Field is one element of a tuple or a list. In a tuple and in a list of
// results (`[frame={...},frame={...}]`) it has a Name; in a list of values
// (`["1","2"]`) Name is empty.
type Field struct {
	Name  string
	Value *Value
}

// Value is an MI value: a constant string, a tuple or a list. The results of
// a record form a tuple, so the same helpers navigate both.
//
// The getters take a dotted path: "frame.func" is the field func of the
// tuple frame; a number selects an element of a list ("stack.0.frame.line");
// a name in a list of results selects its first element of that name
// ("body.bkpt"). An empty path is the value itself. Every method accepts a
// nil *Value and treats it as absent, so lookups chain without checks.
type Value struct {
	kind   Kind
	str    string
	fields []Field
}

// Const returns a constant (string) value.
func Const(s string) *Value { return &Value{kind: KindConst, str: s} }

// NewTuple returns a tuple of the given fields.
func NewTuple(fields ...Field) *Value { return &Value{kind: KindTuple, fields: fields} }

// NewList returns a list of the given fields: give them names for a list of
// results, leave the names empty for a list of values.
func NewList(fields ...Field) *Value { return &Value{kind: KindList, fields: fields} }

// Kind reports the value's form; 0 for a nil Value.
func (v *Value) Kind() Kind {
	if v == nil {
		return 0
	}
	return v.kind
}

// Fields returns the elements of a tuple or a list, in order. The slice
// belongs to the value; do not modify it.
func (v *Value) Fields() []Field {
	if v == nil {
		return nil
	}
	return v.fields
}

// Len is the number of elements of a tuple or list, 0 for anything else.
func (v *Value) Len() int { return len(v.Fields()) }

// Get returns the value at path, or nil when there is none.
func (v *Value) Get(path string) *Value {
	if path == "" {
		return v
	}
	cur := v
	for _, seg := range strings.Split(path, ".") {
		cur = cur.child(seg)
		if cur == nil {
			return nil
		}
	}
	return cur
}

func (v *Value) child(seg string) *Value {
	if v == nil {
		return nil
	}
	switch v.kind {
	case KindList:
		if i, err := strconv.Atoi(seg); err == nil {
			if i < 0 || i >= len(v.fields) {
				return nil
			}
			return v.fields[i].Value
		}
		fallthrough
	case KindTuple:
		for _, f := range v.fields {
			if f.Name == seg {
				return f.Value
			}
		}
	}
	return nil
}

// Lookup returns the constant at path and whether there is one.
func (v *Value) Lookup(path string) (string, bool) {
	c := v.Get(path)
	if c.Kind() != KindConst {
		return "", false
	}
	return c.str, true
}

// String returns the constant at path, or "" when path names no constant.
// Use Lookup to tell an absent field from an empty one.
func (v *Value) String(path string) string {
	s, _ := v.Lookup(path)
	return s
}

// Int returns the constant at path as an int. It reads Go's integer
// literal forms: decimal, 0x hexadecimal, and octal with a leading 0, which
// is how gdb prints a target's exit code (exit-code="012" is 10).
func (v *Value) Int(path string) (int, error) {
	s, ok := v.Lookup(path)
	if !ok {
		return 0, fmt.Errorf("mi: no field %q", path)
	}
	n, err := strconv.ParseInt(s, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("mi: field %q: %w", path, err)
	}
	return int(n), nil
}

// Uint64 returns the constant at path as a uint64, for addresses such as
// addr="0x0000000000401136".
func (v *Value) Uint64(path string) (uint64, error) {
	s, ok := v.Lookup(path)
	if !ok {
		return 0, fmt.Errorf("mi: no field %q", path)
	}
	n, err := strconv.ParseUint(s, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("mi: field %q: %w", path, err)
	}
	return n, nil
}

// Tuple returns the tuple at path, or nil when path names no tuple.
func (v *Value) Tuple(path string) *Value {
	t := v.Get(path)
	if t.Kind() != KindTuple {
		return nil
	}
	return t
}

// List returns the elements of the list at path with their names dropped,
// or nil when path names no list. For `stack=[frame={...},frame={...}]`,
// List("stack") returns the frame tuples.
func (v *Value) List(path string) []*Value {
	l := v.Get(path)
	if l.Kind() != KindList {
		return nil
	}
	out := make([]*Value, len(l.fields))
	for i, f := range l.fields {
		out[i] = f.Value
	}
	return out
}

// All returns every value named name directly in a tuple or list of
// results. gdb repeats names in a few places, for example the extra
// locations that mi2 prints after a multi-location breakpoint
// (`bkpt={...},{number="1.1",...}`), which the parser files under the name
// of the result they follow.
func (v *Value) All(name string) []*Value {
	var out []*Value
	for _, f := range v.Fields() {
		if f.Name == name {
			out = append(out, f.Value)
		}
	}
	return out
}

// MI returns the value in MI syntax, with constants quoted as c-strings.
func (v *Value) MI() string {
	var b strings.Builder
	v.appendMI(&b)
	return b.String()
}

func (v *Value) appendMI(b *strings.Builder) {
	if v == nil {
		b.WriteString(`""`)
		return
	}
	switch v.kind {
	case KindConst:
		b.WriteString(Quote(v.str))
	case KindTuple:
		b.WriteByte('{')
		appendFields(b, v.fields)
		b.WriteByte('}')
	case KindList:
		b.WriteByte('[')
		appendFields(b, v.fields)
		b.WriteByte(']')
	default:
		b.WriteString(`""`)
	}
}

func appendFields(b *strings.Builder, fields []Field) {
	for i, f := range fields {
		if i > 0 {
			b.WriteByte(',')
		}
		if f.Name != "" {
			b.WriteString(f.Name)
			b.WriteByte('=')
		}
		f.Value.appendMI(b)
	}
}
