package plan

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// scalar returns n when it is a scalar, or reports it and returns nil.
func (d *decoder) scalar(n *yaml.Node, path, want string) *yaml.Node {
	n = d.deref(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
		d.errorf(n, path, "expected %s, got %s", want, describe(n))
		return nil
	}
	return n
}

// MaxValue bounds every string value of a plan, and MaxLine every
// single-line one (a location, a condition, a gdb command): gdb takes
// them on one command line, and no real one comes near.
const (
	MaxValue = 64 << 10
	MaxLine  = 4 << 10
)

// str decodes a string of at most MaxValue bytes. Numbers and booleans are
// taken as written, so `location: 42` is the string "42".
func (d *decoder) str(n *yaml.Node, path string) (string, bool) {
	return d.bounded(n, path, MaxValue)
}

// bounded decodes a string of at most limit bytes.
func (d *decoder) bounded(n *yaml.Node, path string, limit int) (string, bool) {
	n = d.scalar(n, path, "a string")
	if n == nil {
		return "", false
	}
	if len(n.Value) > limit {
		d.errorf(n, path, "%d bytes long, at most %d allowed", len(n.Value), limit)
		return "", false
	}
	return n.Value, true
}

// line decodes a non-empty single-line string of at most MaxLine bytes.
func (d *decoder) line(n *yaml.Node, path string) (string, bool) {
	s, ok := d.bounded(n, path, MaxLine)
	switch {
	case !ok:
		return "", false
	case strings.TrimSpace(s) == "":
		d.errorf(n, path, "must not be empty")
		return "", false
	case strings.ContainsAny(s, "\n\r"):
		d.errorf(n, path, "must be a single line, got %q", s)
		return "", false
	}
	return s, true
}

// list decodes a list of non-empty single-line strings. check, when not
// nil, explains why an item is refused, or returns "". Each item is decoded
// and checked where it stands, so every error points at its own item.
func (d *decoder) list(n *yaml.Node, path string, check func(string) string) []string {
	n = d.deref(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		hint := ""
		if n.Kind == yaml.ScalarNode && n.ShortTag() != "!!null" {
			hint = fmt.Sprintf(" (write [%s])", n.Value)
		}
		d.errorf(n, path, "expected a list of strings, got %s%s", describe(n), hint)
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		s, ok := d.line(item, ip)
		if !ok {
			continue
		}
		if check != nil {
			if msg := check(s); msg != "" {
				d.errorf(item, ip, "%s", msg)
				continue
			}
		}
		out = append(out, s)
	}
	return out
}

// integer decodes an integer of at least min.
func (d *decoder) integer(n *yaml.Node, path string, min int) (int, bool) {
	n = d.scalar(n, path, "an integer")
	if n == nil {
		return 0, false
	}
	if n.ShortTag() != "!!int" {
		d.errorf(n, path, "expected an integer, got %s", describe(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil || v > math.MaxInt32 || v < math.MinInt32 {
		d.errorf(n, path, "integer %s is out of range: want %d to %d", n.Value, min, math.MaxInt32)
		return 0, false
	}
	if int(v) < min {
		if v < 0 {
			d.errorf(n, path, "must not be negative, got %d", v)
		} else {
			d.errorf(n, path, "must be at least %d, got %d", min, v)
		}
		return 0, false
	}
	return int(v), true
}

// boolean decodes true or false (yes/no and on/off are accepted too, as
// the YAML library accepts them for booleans).
func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	n = d.scalar(n, path, "true or false")
	if n == nil {
		return false, false
	}
	switch strings.ToLower(n.Value) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off":
		return false, true
	}
	d.errorf(n, path, "expected true or false, got %s", describe(n))
	return false, false
}

// number decodes an integer or decimal number between lo and hi.
func (d *decoder) number(n *yaml.Node, path string, lo, hi float64) (float64, bool) {
	n = d.scalar(n, path, "a number")
	if n == nil {
		return 0, false
	}
	if t := n.ShortTag(); t != "!!int" && t != "!!float" {
		d.errorf(n, path, "expected a number, got %s", describe(n))
		return 0, false
	}
	var v float64
	if err := n.Decode(&v); err != nil || math.IsNaN(v) {
		d.errorf(n, path, "expected a number, got %s", n.Value)
		return 0, false
	}
	if v < lo || v > hi {
		d.errorf(n, path, "must be between %g and %g, got %s", lo, hi, n.Value)
		return 0, false
	}
	return v, true
}

// duration decodes a positive Go duration such as "30s" or "2m".
func (d *decoder) duration(n *yaml.Node, path string) (time.Duration, bool) {
	n = d.scalar(n, path, `a duration such as "30s"`)
	if n == nil {
		return 0, false
	}
	v, err := time.ParseDuration(n.Value)
	if err != nil || v <= 0 {
		d.errorf(n, path, `expected a positive duration such as "30s" or "2m", got %s`, describe(n))
		return 0, false
	}
	return v, true
}

// size decodes a byte count of at least 1: an integer or a string such as
// "1KiB" (see ParseSize).
func (d *decoder) size(n *yaml.Node, path string) (int64, bool) {
	n = d.scalar(n, path, `a size such as "1KiB"`)
	if n == nil {
		return 0, false
	}
	var v int64
	var err error
	if n.ShortTag() == "!!int" {
		if n.Decode(&v) != nil {
			err = fmt.Errorf("bad size %s: out of range", n.Value)
		} else if v < 0 {
			err = fmt.Errorf("bad size %s: negative", n.Value)
		}
	} else {
		v, err = ParseSize(n.Value)
	}
	if err != nil {
		d.errorf(n, path, "%v", err)
		return 0, false
	}
	if v == 0 {
		d.errorf(n, path, "must be at least 1 byte (leave the key out for no limit)")
		return 0, false
	}
	return v, true
}

// enum decodes one of a fixed set of words.
func (d *decoder) enum(n *yaml.Node, path string, values ...string) (string, bool) {
	s, ok := d.str(n, path)
	if !ok {
		return "", false
	}
	for _, v := range values {
		if s == v {
			return s, true
		}
	}
	quoted := make([]string, len(values))
	for i, v := range values {
		quoted[i] = strconv.Quote(v)
	}
	list := strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
	d.errorf(n, path, "must be %s, got %q%s", list, s, suggest(s, values))
	return "", false
}
