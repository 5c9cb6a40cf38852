package native

import (
	"fmt"
	"sort"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// phases adds up, per breakpoint, what the in-use heap did within its
// around_call calls: from the hit to the return of each call. With
// several breakpoints (the phases of a request: a chunk, the final
// chunk, the connection's end) the process's heap between hits grows
// alike at each of them; what each call left behind tells which phase
// keeps the memory.
type phases struct {
	plan  *plan.Plan
	calls map[string]*runjson.Phase
}

func newPhases(p *plan.Plan) *phases {
	return &phases{plan: p, calls: make(map[string]*runjson.Phase)}
}

// add counts a return-phase stop's call.
func (p *phases) add(t *backend.Stop) {
	if t.HitOf == nil || t.Stop.Memory == nil || t.HitOf.Stop.Memory == nil {
		return
	}
	from, to := pointOf(0, t.HitOf.Stop.Memory), pointOf(0, t.Stop.Memory)
	if !from.alloc || !to.alloc {
		return
	}
	ph := p.calls[t.Stop.Breakpoint]
	if ph == nil {
		ph = &runjson.Phase{Breakpoint: t.Stop.Breakpoint}
		p.calls[t.Stop.Breakpoint] = ph
	}
	ph.Calls++
	ph.InUseLeftByCalls += to.use - from.use
}

// list is run.json's "phases", in plan order.
func (p *phases) list() []runjson.Phase {
	var out []runjson.Phase
	for _, bp := range p.plan.Breakpoints {
		if ph := p.calls[bp.Name]; ph != nil {
			out = append(out, *ph)
		}
	}
	return out
}

// phaseOf says what breakpoint bp's stops saw of the in-use heap: its
// growth per hit between hits (the verdict's trend) and, with
// around_call, what its calls left behind; "" when there is neither.
func phaseOf(m *runjson.Manifest, bp string) string {
	out := ""
	for _, v := range m.Verdicts {
		if v.Breakpoint == bp && v.Figures.InUsePerHit != nil {
			out = fmt.Sprintf("between hits in-use heap %s per hit", snapshots.FormatDelta(*v.Figures.InUsePerHit))
		}
	}
	for _, ph := range m.Phases {
		if ph.Breakpoint != bp || ph.Calls == 0 {
			continue
		}
		if out != "" {
			out += "; "
		}
		out += fmt.Sprintf("each call left %s in use (%s, %s in all)", snapshots.FormatDelta(ph.InUseLeftByCalls/int64(ph.Calls)),
			backend.Plural(ph.Calls, "call"), snapshots.FormatDelta(ph.InUseLeftByCalls))
	}
	return out
}

// keeper is the line that says which phase keeps memory, when two or more
// breakpoints measured their calls (around_call): each one's calls, what
// each left in use on average, the most first; "" otherwise.
func keeper(m *runjson.Manifest) string {
	var phs []runjson.Phase
	for _, ph := range m.Phases {
		if ph.Calls > 0 {
			phs = append(phs, ph)
		}
	}
	if len(phs) < 2 {
		return ""
	}
	perCall := func(ph runjson.Phase) int64 { return ph.InUseLeftByCalls / int64(ph.Calls) }
	sort.SliceStable(phs, func(i, j int) bool { return perCall(phs[i]) > perCall(phs[j]) })
	out := "which phase keeps memory: each call of"
	for i, ph := range phs {
		if i > 0 {
			out += ", of"
		}
		out += fmt.Sprintf(" %s left %s in use", ph.Breakpoint, snapshots.FormatDelta(perCall(ph)))
	}
	return out
}
