package plan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/snapctl/snapctl/internal/fsutil"
)

// Defaults for the keys a plan may leave out.
const (
	DefaultSchedulerLocking = "on"
	DefaultKeepSnapshots    = KeepAll
	DefaultFairSched        = "yes"
	DefaultGroupBy          = "site"
	DefaultReportDepth      = 12
	DefaultStopTimeout      = 30 * time.Second
	DefaultThreads          = ThreadsNone
)

// MaxPlanSize bounds what Load reads: a plan is a few kilobytes, and a
// path such as /dev/zero must not fill memory.
const MaxPlanSize = 1 << 20

// Load reads and parses the plan file at path, at most MaxPlanSize bytes.
// On failure the error is an ErrorList of positioned *Error values.
func Load(path string) (*Plan, error) { return LoadContext(context.Background(), path) }

// LoadContext is Load, whose reading ends when ctx does. The plan may be a
// regular file or a pipe (a FIFO, a shell's <(...)); anything else, a
// directory or a device such as /dev/zero, is refused before it is read.
func LoadContext(ctx context.Context, path string) (*Plan, error) {
	data, err := fsutil.ReadFile(ctx, path, fsutil.ReadOptions{What: "plan", Pipes: true, Limit: MaxPlanSize})
	var (
		pe *fs.PathError
		nf *fsutil.NotFileError
		tl *fsutil.TooLargeError
	)
	switch {
	case errors.As(err, &tl):
		return nil, ErrorList{{File: path, Msg: fmt.Sprintf("larger than %d KiB; a plan is a few kilobytes", MaxPlanSize>>10)}}
	case errors.As(err, &nf):
		return nil, ErrorList{{File: path, Msg: "cannot read the plan: it " + nf.Reason(), Err: err}}
	case errors.As(err, &pe):
		return nil, ErrorList{{File: path, Msg: "cannot read the plan: " + pe.Err.Error(), Err: err}}
	case err != nil:
		return nil, ErrorList{{File: path, Msg: "cannot read the plan: " + err.Error(), Err: err}}
	}
	return Parse(path, data)
}

// Parse decodes, validates and defaults a plan. name is used in error
// positions and Plan.File. On failure the error is an ErrorList holding
// every problem found, in file order, each with its line and column.
func Parse(name string, data []byte) (*Plan, error) {
	d := &decoder{file: name, budget: maxNodes}
	p := &Plan{
		File:             name,
		Source:           bytes.Clone(data),
		Backend:          Backends[0],
		SchedulerLocking: DefaultSchedulerLocking,
		KeepSnapshots:    DefaultKeepSnapshots,
		StopTimeout:      DefaultStopTimeout,
		Threads:          DefaultThreads,
		Valgrind:         Valgrind{FairSched: DefaultFairSched, Blocks: true},
		Report:           Report{GroupBy: DefaultGroupBy, Depth: DefaultReportDepth},
	}
	if root := d.document(data); root != nil {
		d.plan(root, p)
	}
	for i := range p.Breakpoints {
		if p.Breakpoints[i].KeepSnapshots == "" {
			p.Breakpoints[i].KeepSnapshots = p.KeepSnapshots
		}
		if p.Breakpoints[i].Threads == "" {
			p.Breakpoints[i].Threads = p.Threads
		}
	}
	if len(d.errs) > 0 {
		sort.SliceStable(d.errs, func(i, j int) bool {
			a, b := d.errs[i], d.errs[j]
			if a.Line != b.Line {
				return a.Line < b.Line
			}
			return a.Column < b.Column
		})
		return nil, d.errs
	}
	return p, nil
}

// maxNodes bounds the work of one Parse, since aliases can make a small
// file describe a huge tree.
const maxNodes = 100000

// decoder walks the YAML node tree of one plan and collects errors.
type decoder struct {
	file   string
	errs   ErrorList
	budget int
}

// errorf records an error at node n about key.
func (d *decoder) errorf(n *yaml.Node, key, format string, args ...any) {
	e := &Error{File: d.file, Key: key, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) pos(n *yaml.Node) Pos {
	return Pos{File: d.file, Line: n.Line, Column: n.Column}
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError turns an error of the YAML library into a positioned Error.
// The library's line is often that of the enclosing block, or missing, so
// the line is found again as the first line at which a prefix of the
// document fails with the same message. The column stays unknown.
func (d *decoder) syntaxError(err error, data []byte) {
	msg := strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), ""), "yaml: ")
	e := &Error{File: d.file, Msg: "invalid YAML: " + msg, Err: err}
	if m := yamlLineRE.FindStringSubmatch(err.Error()); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
	}
	if line := failingLine(data, msg); line > 0 {
		e.Line = line
	}
	d.errs = append(d.errs, e)
}

// maxProbeLines bounds failingLine's quadratic search.
const maxProbeLines = 2000

// failingLine returns the 1-based number of the first line at which the
// document's prefix fails to parse with msg, or 0.
func failingLine(data []byte, msg string) int {
	if bytes.Count(data, []byte("\n")) > maxProbeLines {
		return 0
	}
	end := 0
	for line := 1; end < len(data); line++ {
		next := bytes.IndexByte(data[end:], '\n')
		if next < 0 {
			end = len(data)
		} else {
			end += next + 1
		}
		dec := yaml.NewDecoder(bytes.NewReader(data[:end]))
		var n yaml.Node
		var err error
		for err == nil {
			err = decode(dec, &n)
		}
		if err != io.EOF && strings.TrimPrefix(yamlLineRE.ReplaceAllString(err.Error(), ""), "yaml: ") == msg {
			return line
		}
	}
	return 0
}

// decode reads one YAML document, turning a panic of the YAML library into
// an error: snapctl never panics on bad input.
func decode(dec *yaml.Decoder, n *yaml.Node) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("yaml: cannot parse: %v", r)
		}
	}()
	return dec.Decode(n)
}

// document parses data into the root node of its single document, or
// records why it cannot.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	err := decode(dec, &doc)
	if err == io.EOF {
		d.errs = append(d.errs, &Error{File: d.file, Line: 1, Column: 1, Msg: "the plan is empty; it needs at least a \"breakpoints\" list"})
		return nil
	}
	if err != nil {
		d.syntaxError(err, data)
		return nil
	}
	var second yaml.Node
	switch err := decode(dec, &second); {
	case err == io.EOF:
	case err != nil:
		d.syntaxError(err, data)
		return nil
	case len(second.Content) > 0 && !isNull(second.Content[0]):
		d.errorf(&second, "", "a plan is a single YAML document; remove the second one (from \"---\")")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 || isNull(doc.Content[0]) {
		d.errs = append(d.errs, &Error{File: d.file, Line: 1, Column: 1, Msg: "the plan is empty; it needs at least a \"breakpoints\" list"})
		return nil
	}
	return doc.Content[0]
}

// deref follows aliases and charges the node to the budget. It returns nil
// once the budget is spent.
func (d *decoder) deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > 100 {
			return nil
		}
		n = n.Alias
	}
	if d.budget <= 0 {
		return nil
	}
	d.budget--
	if d.budget == 0 {
		d.errorf(n, "", "the plan is too large (more than %d YAML nodes, counting aliases)", maxNodes)
	}
	return n
}

func isNull(n *yaml.Node) bool {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// field is one key of a mapping and what to do with its value.
type field struct {
	key string
	set func(v *yaml.Node, path string)
}

// pairs walks the key/value pairs of a mapping, reporting non-scalar and
// duplicate keys. It reports a value that is not a mapping and returns
// false.
func (d *decoder) pairs(n *yaml.Node, path, want string, fn func(k, v *yaml.Node, key string)) bool {
	n = d.deref(n)
	if n == nil {
		return false
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected %s, got %s", want, describe(n))
		return false
	}
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.deref(n.Content[i]), n.Content[i+1]
		if k == nil {
			return true
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, path, "keys must be plain names, got %s", describe(k))
			continue
		}
		kp := join(path, k.Value)
		if k.Value == "<<" && k.ShortTag() == "!!merge" {
			d.errorf(k, kp, "merge keys (<<) are not supported in a plan")
			continue
		}
		if prev, ok := seen[k.Value]; ok {
			d.errorf(k, kp, "duplicate key (first at line %d)", prev.Line)
			continue
		}
		seen[k.Value] = k
		fn(k, v, kp)
	}
	return true
}

// mapping decodes a mapping with a fixed set of keys. A null value leaves
// the field at its default.
func (d *decoder) mapping(n *yaml.Node, path string, fields []field) bool {
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.key
	}
	return d.pairs(n, path, "a mapping", func(k, v *yaml.Node, kp string) {
		for _, f := range fields {
			if f.key == k.Value {
				if !isNull(v) {
					f.set(v, kp)
				}
				return
			}
		}
		d.errorf(k, kp, "unknown key%s", suggest(k.Value, known))
	})
}

// describe names what a node is, for "expected X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(n.Value)
		}
		return n.Value
	}
	return "a YAML node of kind " + strconv.Itoa(int(n.Kind))
}
