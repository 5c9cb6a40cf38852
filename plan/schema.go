package plan

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// plan decodes the top-level mapping into p and checks what spans keys.
func (d *decoder) plan(root *yaml.Node, p *Plan) {
	sawBreakpoints := false
	var backend, sites *yaml.Node // where backend and native.sites were given
	var sitesOf string            // the backend whose section gave sites
	ok := d.mapping(root, "", []field{
		{"target", func(v *yaml.Node, kp string) { d.target(v, kp, &p.Target) }},
		{"backend", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, Backends...); ok {
				p.Backend, backend = s, v
			}
		}},
		{"native", func(v *yaml.Node, kp string) {
			// A backend's section is keyed by the backend's name.
			section := kp
			d.mapping(v, kp, []field{
				{"trim_probe", func(v *yaml.Node, kp string) {
					if b, ok := d.boolean(v, kp); ok {
						p.Native.TrimProbe = b
					}
				}},
				{"sites", func(v *yaml.Node, kp string) {
					if b, ok := d.boolean(v, kp); ok {
						p.Native.Sites, p.Native.SitesPos, sites, sitesOf = b, d.pos(v), v, section
					}
				}},
			})
		}},
		{"valgrind", func(v *yaml.Node, kp string) { d.valgrind(v, kp, &p.Valgrind) }},
		{"gdb", func(v *yaml.Node, kp string) { d.gdb(v, kp, &p.Gdb) }},
		{"scheduler_locking", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, "on", "step", "off", "replay"); ok {
				p.SchedulerLocking = s
			}
		}},
		{"keep_snapshots", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, KeepAll, KeepChanged); ok {
				p.KeepSnapshots = s
			}
		}},
		{"stop_timeout", func(v *yaml.Node, kp string) {
			if t, ok := d.duration(v, kp); ok {
				p.StopTimeout = t
			}
		}},
		{"threads", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, ThreadsNone, ThreadsCurrent, ThreadsAll); ok {
				p.Threads = s
			}
		}},
		{"breakpoints", func(v *yaml.Node, kp string) {
			sawBreakpoints = true
			p.Breakpoints = d.breakpoints(v, kp)
		}},
		{"report", func(v *yaml.Node, kp string) { d.report(v, kp, &p.Report) }},
		{"workload", func(v *yaml.Node, kp string) {
			p.Workload = d.args(v, kp)
			if p.Workload != nil && (len(p.Workload) == 0 || p.Workload[0] == "") {
				d.errorf(v, kp, "expected a command and its arguments, as a list: [curl, -s, http://127.0.0.1:8080/]")
			}
		}},
	})
	if !ok {
		if n := d.deref(root); n != nil && n.Kind != yaml.MappingNode {
			// pairs said "expected a mapping"; say what kind of mapping.
			d.errs[len(d.errs)-1].Msg = fmt.Sprintf("expected a mapping of plan keys (target, valgrind, breakpoints, ...), got %s", describe(n))
		}
		return
	}
	// native.sites records call sites natively: it implies the backend
	// whose section it is, as --sites does, and contradicts any other
	// backend named outright.
	if p.Native.Sites {
		switch {
		case backend == nil:
			p.Backend = sitesOf
		case p.Backend != sitesOf:
			d.errorf(sites, "native.sites", "true needs the %s backend, and the plan says backend: %s (line %d), which records call sites already: drop one of them", sitesOf, p.Backend, backend.Line)
		}
	}
	if !sawBreakpoints {
		for i := 0; i+1 < len(root.Content); i += 2 {
			if k := root.Content[i]; k.Value == "breakpoints" {
				d.errorf(root.Content[i+1], "breakpoints", "empty; a plan needs at least one breakpoint")
				return
			}
		}
		d.errorf(root, "breakpoints", "missing; a plan needs at least one breakpoint")
	}
}

func (d *decoder) target(n *yaml.Node, kp string, t *Target) {
	d.mapping(n, kp, []field{
		{"args", func(v *yaml.Node, kp string) { t.Args = d.args(v, kp) }},
		{"env", func(v *yaml.Node, kp string) { t.Env = d.env(v, kp) }},
		{"cwd", func(v *yaml.Node, kp string) {
			if s, ok := d.line(v, kp); ok {
				t.Cwd, t.CwdPos = s, d.pos(v)
			}
		}},
	})
}

// args decodes a list of program arguments, which may be empty strings.
func (d *decoder) args(n *yaml.Node, kp string) []string {
	n = d.deref(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, kp, "expected a list of strings, got %s", describe(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		if isNull(item) {
			out = append(out, "")
			continue
		}
		if s, ok := d.str(item, fmt.Sprintf("%s[%d]", kp, i)); ok {
			out = append(out, s)
		}
	}
	return out
}

// env decodes a mapping of environment variables into KEY=VALUE strings,
// in plan order.
func (d *decoder) env(n *yaml.Node, kp string) []string {
	var out []string
	d.pairs(n, kp, "a mapping of variable names to values", func(k, v *yaml.Node, vp string) {
		if k.Value == "" || strings.ContainsAny(k.Value, "=\x00") {
			d.errorf(k, vp, "not a valid environment variable name")
			return
		}
		val := ""
		if !isNull(v) {
			s, ok := d.str(v, vp)
			if !ok {
				return
			}
			if strings.ContainsRune(s, 0) {
				d.errorf(v, vp, "environment values cannot contain NUL")
				return
			}
			val = s
		}
		out = append(out, k.Value+"="+val)
	})
	return out
}

func (d *decoder) valgrind(n *yaml.Node, kp string, vg *Valgrind) {
	d.mapping(n, kp, []field{
		{"threshold", func(v *yaml.Node, kp string) {
			if f, ok := d.number(v, kp, 0, 100); ok {
				vg.Threshold = f
			}
		}},
		{"pages_as_heap", func(v *yaml.Node, kp string) { vg.PagesAsHeap, _ = d.boolean(v, kp) }},
		{"stacks", func(v *yaml.Node, kp string) { vg.Stacks, _ = d.boolean(v, kp) }},
		{"depth", func(v *yaml.Node, kp string) {
			if i, ok := d.integer(v, kp, 0); ok {
				if i > 200 {
					d.errorf(v, kp, "must be at most 200 (massif's limit), got %d", i)
					return
				}
				vg.Depth = i
			}
		}},
		{"blocks", func(v *yaml.Node, kp string) {
			if b, ok := d.boolean(v, kp); ok {
				vg.Blocks = b
			}
		}},
		{"alloc_fns", func(v *yaml.Node, kp string) { vg.AllocFns = d.list(v, kp, checkFunction) }},
		{"ignore_fns", func(v *yaml.Node, kp string) { vg.IgnoreFns = d.list(v, kp, checkFunction) }},
		{"fair_sched", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, "no", "yes", "try"); ok {
				vg.FairSched = s
			}
		}},
		{"args", func(v *yaml.Node, kp string) { vg.Args = d.list(v, kp, checkValgrindArg) }},
	})
}

// checkFunction explains why a function name for --alloc-fn/--ignore-fn
// is refused, or returns "": valgrind takes each as one option word, so
// no spaces.
func checkFunction(fn string) string {
	if strings.ContainsAny(fn, " \t") {
		return fmt.Sprintf("function name %q contains a space; valgrind matches the name as massif prints it, without spaces", fn)
	}
	return ""
}

func (d *decoder) gdb(n *yaml.Node, kp string, g *Gdb) {
	d.mapping(n, kp, []field{
		{"init", func(v *yaml.Node, kp string) { g.Init = d.list(v, kp, checkCommand) }},
	})
}

func (d *decoder) report(n *yaml.Node, kp string, r *Report) {
	d.mapping(n, kp, []field{
		{"group_by", func(v *yaml.Node, kp string) {
			if s, ok := d.enum(v, kp, "site", "function", "stack"); ok {
				r.GroupBy = s
			}
		}},
		{"depth", func(v *yaml.Node, kp string) {
			if i, ok := d.integer(v, kp, 0); ok {
				r.Depth = i
			}
		}},
		// Frame patterns have only the wildcard '*', every other character
		// stands for itself (snapshots.ParseFramePattern), so any non-empty
		// line is a valid pattern.
		{"library_frames", func(v *yaml.Node, kp string) { r.LibraryFrames = d.list(v, kp, nil) }},
		{"ignore", func(v *yaml.Node, kp string) { r.Ignore = d.list(v, kp, nil) }},
		{"fail_on", func(v *yaml.Node, kp string) {
			d.mapping(v, kp, []field{
				{"growth_per_hit", func(v *yaml.Node, kp string) {
					if s, ok := d.size(v, kp); ok {
						r.FailOn.GrowthPerHit = s
					}
				}},
				{"total_growth", func(v *yaml.Node, kp string) {
					if s, ok := d.size(v, kp); ok {
						r.FailOn.TotalGrowth = s
					}
				}},
				{"lost_per_hit", func(v *yaml.Node, kp string) {
					if s, ok := d.size(v, kp); ok {
						r.FailOn.LostPerHit, r.FailOn.LostPerHitPos = s, d.pos(v)
					}
				}},
			})
		}},
	})
}

// breakpoints decodes the breakpoint list and checks names are unique.
func (d *decoder) breakpoints(n *yaml.Node, kp string) []Breakpoint {
	n = d.deref(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, kp, "expected a list of breakpoints, got %s", describe(n))
		return nil
	}
	if len(n.Content) == 0 {
		d.errorf(n, kp, "empty; a plan needs at least one breakpoint")
		return nil
	}
	type named struct {
		pos Pos
		key string
	}
	names := make(map[string]named)
	var out []Breakpoint
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", kp, i)
		b, nameNode, ok := d.breakpoint(item, ip, i)
		if b.Name == "" {
			continue
		}
		if prev, dup := names[b.Name]; dup {
			switch {
			case nameNode != nil:
				d.errorf(nameNode, ip+".name", "duplicate name %q (already used by %s at %s)", b.Name, prev.key, prev.pos)
			default:
				d.errorf(item, ip, "the name %q derived from the location is already used by %s (%s); give each a \"name\"", b.Name, prev.key, prev.pos)
			}
			continue
		}
		names[b.Name] = named{pos: b.Pos, key: ip}
		if ok {
			out = append(out, b)
		}
	}
	return out
}

// breakpoint decodes one entry. It returns the name's node, nil when the
// name was derived from the location.
func (d *decoder) breakpoint(n *yaml.Node, kp string, index int) (Breakpoint, *yaml.Node, bool) {
	b := Breakpoint{Every: 1, index: index}
	n = d.deref(n)
	if n == nil {
		return b, nil, false
	}
	b.Pos = d.pos(n)
	if n.Kind == yaml.ScalarNode && !isNull(n) {
		d.errorf(n, kp, "expected a mapping with at least a \"location\", got %s (write: - location: %s)", describe(n), n.Value)
		return b, nil, false
	}
	var nameNode, locNode *yaml.Node
	before := len(d.errs)
	ok := d.mapping(n, kp, []field{
		{"name", func(v *yaml.Node, kp string) {
			nameNode = v
			if s, ok := d.str(v, kp); ok {
				if msg := checkName(s); msg != "" {
					d.errorf(v, kp, "%s", msg)
					return
				}
				b.Name = s
			}
		}},
		{"location", func(v *yaml.Node, kp string) {
			locNode = v
			if s, ok := d.line(v, kp); ok {
				if _, err := ExplicitLocation(strings.TrimSpace(s)); err != nil {
					d.errorf(v, kp, "%v", err)
					return
				}
				b.Location = strings.TrimSpace(s)
				b.LocationPos = d.pos(v)
			}
		}},
		{"condition", func(v *yaml.Node, kp string) {
			if s, ok := d.line(v, kp); ok {
				b.Condition, b.ConditionPos = s, d.pos(v)
			}
		}},
		{"thread", func(v *yaml.Node, kp string) { b.Thread, _ = d.integer(v, kp, 1) }},
		{"skip", func(v *yaml.Node, kp string) { b.Skip, _ = d.integer(v, kp, 0) }},
		{"every", func(v *yaml.Node, kp string) {
			if i, ok := d.integer(v, kp, 1); ok {
				b.Every = i
			}
		}},
		{"max_hits", func(v *yaml.Node, kp string) { b.MaxHits, _ = d.integer(v, kp, 1) }},
		{"around_call", func(v *yaml.Node, kp string) { b.AroundCall, _ = d.boolean(v, kp) }},
		{"commands", func(v *yaml.Node, kp string) { b.Commands = d.list(v, kp, checkCommand) }},
		{"optional", func(v *yaml.Node, kp string) { b.Optional, _ = d.boolean(v, kp) }},
		{"keep_snapshots", func(v *yaml.Node, kp string) { b.KeepSnapshots, _ = d.enum(v, kp, KeepAll, KeepChanged) }},
		{"threads", func(v *yaml.Node, kp string) { b.Threads, _ = d.enum(v, kp, ThreadsNone, ThreadsCurrent, ThreadsAll) }},
		{"end_run_after", func(v *yaml.Node, kp string) { b.EndRunAfter, _ = d.integer(v, kp, 1) }},
		{"pending", func(v *yaml.Node, kp string) { b.Pending, _ = d.boolean(v, kp) }},
	})
	if !ok {
		return b, nil, false
	}
	if locNode == nil || isNull(locNode) {
		d.errorf(n, kp, "missing \"location\" (a function, file:line or *address)")
		return b, nil, false
	}
	if b.Location == "" {
		return b, nil, false
	}
	if nameNode == nil || isNull(nameNode) {
		nameNode = nil
		b.Name = deriveName(b.Location)
		if b.Name == "" {
			d.errorf(n, kp, "cannot derive a name from location %q; add a \"name\"", b.Location)
			return b, nil, false
		}
	}
	return b, nameNode, len(d.errs) == before
}

// maxNameLen bounds breakpoint names, which end up in file names.
const maxNameLen = 64

// checkName explains what is wrong with a breakpoint name, or returns "".
func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > maxNameLen:
		return fmt.Sprintf("name is %d characters long; at most %d are allowed", len(s), maxNameLen)
	case s == "." || s == "..":
		return fmt.Sprintf("%q is not a usable name", s)
	}
	for _, r := range s {
		if !nameChar(r) {
			return fmt.Sprintf("name %q may only contain letters, digits, '_', '.' and '-' (it is used in file names)", s)
		}
	}
	return ""
}

func nameChar(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-'
}

// deriveName makes a name from a location: every run of characters that
// may not appear in a name becomes one '-', and leading and trailing '-'
// and '.' are dropped: "leak.c:15" gives "leak.c-15", "Scheduler::submit(int)"
// gives "Scheduler-submit-int", "*0x401136" gives "0x401136".
func deriveName(loc string) string {
	var b strings.Builder
	dash := false
	for _, r := range loc {
		if nameChar(r) && r != '-' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	s := strings.Trim(b.String(), "-.")
	if len(s) > maxNameLen {
		s = strings.TrimRight(s[:maxNameLen], "-.")
	}
	return s
}
