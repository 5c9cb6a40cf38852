package massif

import (
	"strconv"

	"github.com/snapctl/snapctl/plan"
)

// PlanArgs returns the valgrind options the plan asks for, in this
// order: --threshold, --depth (when set), --pages-as-heap=yes and
// --stacks=yes (when true), one --alloc-fn and one --ignore-fn per
// function, --fair-sched, then valgrind.args as written. valgrindArgs adds
// the options snapctl owns (--tool=massif, --vgdb*, --massif-out-file,
// --log-file) before them.
func PlanArgs(p *plan.Plan) []string {
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
