package driver

import (
	"strconv"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
)

// breakInsertArgs returns the arguments of the MI command -break-insert for
// b, each one MI word, already quoted where MI needs it, so that the
// command line is "-break-insert " + strings.Join(args, " "):
//
//	-i 5 -c "$_thread == 2 && (id % 10 == 0)" handle_request
//	"Scheduler::submit(int, char)"
//
// Skip becomes gdb's ignore count (-i). Thread becomes part of the
// condition ($_thread == N) rather than -p: the thread may not exist yet
// when the breakpoint is inserted, and gdb refuses -p for an unknown
// thread. Every, MaxHits and AroundCall are the stop loop's business and
// do not appear. A gdb explicit location ("-source leak.c -line 15")
// becomes MI's options for it (--source leak.c --line 15), since MI does
// not parse explicit locations in the location string; so does a function
// in single quotes (--function NAME, see plan.GdbLocation).
func breakInsertArgs(b *plan.Breakpoint) []string {
	var args []string
	if b.Skip > 0 {
		args = append(args, "-i", strconv.Itoa(b.Skip))
	}
	if c := b.GdbCondition(); c != "" {
		args = append(args, "-c", mi.Word(c))
	}
	// The plan was checked: an explicit location reads, and so does the
	// one GdbLocation makes of a quoted function.
	loc := b.GdbLocation()
	if opts, err := plan.ExplicitLocation(loc); err == nil && opts != nil {
		for _, o := range opts {
			args = append(args, "--"+o.Name)
			if o.Value != "" {
				args = append(args, mi.Word(o.Value))
			}
		}
		return args
	}
	return append(args, mi.Word(loc))
}

// massifPlanArgs returns the valgrind options the plan asks for, in this
// order: --threshold, --depth (when set), --pages-as-heap=yes and
// --stacks=yes (when true), one --alloc-fn and one --ignore-fn per
// function, --fair-sched, then valgrind.args as written. valgrindArgs adds
// the options snapctl owns (--tool=massif, --vgdb*, --massif-out-file,
// --log-file) before them.
func massifPlanArgs(p *plan.Plan) []string {
	v := p.Valgrind
	args := []string{"--threshold=" + strconv.FormatFloat(v.Threshold, 'f', -1, 64)}
	if v.Depth > 0 {
		args = append(args, "--depth="+strconv.Itoa(v.Depth))
	}
	if v.PagesAsHeap {
		args = append(args, "--pages-as-heap=yes")
	}
	if v.Stacks {
		args = append(args, "--stacks=yes")
	}
	for _, fn := range v.AllocFns {
		args = append(args, "--alloc-fn="+fn)
	}
	for _, fn := range v.IgnoreFns {
		args = append(args, "--ignore-fn="+fn)
	}
	fair := v.FairSched
	if fair == "" {
		fair = plan.DefaultFairSched
	}
	args = append(args, "--fair-sched="+fair)
	return append(args, v.Args...)
}
