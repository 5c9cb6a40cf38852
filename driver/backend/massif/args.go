package massif

import (
	"strconv"

	"github.com/snapctl/snapctl/driver/backend/valgrind"
	"github.com/snapctl/snapctl/plan"
)

// PlanArgs returns the valgrind options the plan asks for, in this
// order: --threshold, --depth (when set), --pages-as-heap=yes and
// --stacks=yes (when true), one --alloc-fn and one --ignore-fn per
// function, --fair-sched, then valgrind.args as written. The valgrind
// launcher adds the options snapctl owns (--tool=massif, --vgdb*,
// --log-file, and here --massif-out-file) before them.
func PlanArgs(p *plan.Plan) []string {
	return append(toolArgs(p), valgrind.CommonArgs(p)...)
}

// toolArgs are the plan's options of massif alone.
func toolArgs(p *plan.Plan) []string {
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
	return args
}
