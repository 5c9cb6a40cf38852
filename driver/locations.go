package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/preflight"
)

// Checking the plan's locations before the run: a gdb on the bare
// binary (and the libraries it links) inserts each breakpoint, so that a
// location or condition gdb cannot take fails before valgrind starts.

// validateLocations asks gdb, on the binary alone and before valgrind
// starts, whether every breakpoint's location resolves. It reports whether
// one resolves in the program itself (inProgram): the program's debug
// information matters to the breakpoints only then.
//
// attach is the process snapctl attaches to (0 when it starts the
// program): the libraries it has loaded, dlopen'ed ones included (a
// plugin, a ctypes library in python), count as linked.
func validateLocations(ctx context.Context, gdbPath, binary string, attach int, p *plan.Plan, env []string, timeout time.Duration) (inProgram bool, err error) {
	r := checkLocations(ctx, gdbPath, binary, attach, p, env, timeout)
	return r.inProgram, r.err
}

// checkLocations is validateLocations, which also says whether every
// location but the pending ones resolved in the program alone (resolved),
// as the early gdb's check does (gdb.Early.LocationsResolved).
func checkLocations(ctx context.Context, gdbPath, binary string, attach int, p *plan.Plan, env []string, timeout time.Duration) (res locatedResult) {
	inProgram, err := validate(ctx, gdbPath, binary, attach, p, env, timeout, &res.resolved)
	res.inProgram, res.err = inProgram, err
	if err != nil {
		res.resolved = false
	}
	return res
}

func validate(ctx context.Context, gdbPath, binary string, attach int, p *plan.Plan, env []string, timeout time.Duration, resolved *bool) (inProgram bool, err error) {
	c, err := mi.Start(ctx, mi.Options{Path: gdbPath, Args: []string{binary}, Env: env, StartTimeout: timeout})
	if err != nil {
		if ctx.Err() != nil {
			return false, fmt.Errorf("checking breakpoint locations: %w", ErrInterrupted)
		}
		return false, &ToolError{Tool: "gdb", Msg: "cannot start", Err: err}
	}
	defer c.Close()
	insert := func(bp *plan.Breakpoint) (*mi.Result, error) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		return gdb.Send(cctx, c, gdb.BreakInsert(gdb.InsertArgs(bp, false)...))
	}
	// First in the program alone, then what it does not define once gdb
	// has read the symbols of the libraries it links, static functions
	// included.
	var again []int
	for i := range p.Breakpoints {
		r, err := insert(&p.Breakpoints[i])
		if err != nil || gdb.PendingResult(r) {
			again = append(again, i)
			continue
		}
		inProgram = true
	}
	*resolved = !slices.ContainsFunc(again, func(i int) bool { return !p.Breakpoints[i].Pending })
	if len(again) > 0 && ctx.Err() == nil {
		loadLibrarySymbols(ctx, c, binary, attach, p.Target.Cwd, env, timeout)
	}
	for _, i := range again {
		bp := &p.Breakpoints[i]
		r, err := insert(bp)
		if err != nil {
			if ctx.Err() != nil {
				return false, fmt.Errorf("checking breakpoint locations: %w", ErrInterrupted)
			}
			var me *mi.Error
			if errors.As(err, &me) {
				if bp.Pending {
					continue // resolved, or refused, once a library loads it
				}
				return false, locationOrCondition(ctx, c, bp, me.Msg, timeout)
			}
			return false, &ToolError{Tool: "gdb", Msg: "checking breakpoint locations", Err: err}
		}
		if gdb.PendingResult(r) && !bp.Pending {
			return false, unresolvedError(bp, "no code location matches")
		}
	}
	return inProgram, nil
}

// locatedResult is what the check of the plan's locations found: an
// error, or whether a location resolves in the program itself.
type locatedResult struct {
	inProgram bool
	err       error
	// resolved: every location but the pending ones resolved in the
	// program alone.
	resolved bool
}

// programWarnings returns the warnings of the checks that apply to the
// run: those about the program's debug information and symbols only when a
// breakpoint is in the program. With every breakpoint in a library (a C
// library python3 loads through ctypes, a plugin), they concern a binary
// no breakpoint is in.
func programWarnings(warnings []preflight.Finding, inProgram bool) []preflight.Finding {
	if inProgram {
		return warnings
	}
	var out []preflight.Finding
	for _, w := range warnings {
		if w.Check != preflight.CheckDebugInfo && w.Check != preflight.CheckSymbols {
			out = append(out, w)
		}
	}
	return out
}

// unresolvedError is the plan error for a location that neither the
// program nor the libraries it links define; msg is gdb's word for it.
func unresolvedError(bp *plan.Breakpoint, msg string) error {
	return bp.LocationError("gdb cannot resolve %q in the program or the libraries it links: %s; if a library the program loads later (dlopen) defines it, add `pending: true` to the breakpoint",
		bp.Location, strings.TrimSuffix(msg, "."))
}

// locationOrCondition says which of a breakpoint's location and condition
// gdb refused with msg: the location when it does not resolve without the
// condition either, else the condition.
func locationOrCondition(ctx context.Context, c *mi.Client, bp *plan.Breakpoint, msg string, timeout time.Duration) error {
	if bp.GdbCondition() == "" {
		return unresolvedError(bp, msg)
	}
	plain := *bp
	plain.Condition, plain.Thread = "", 0
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, err := gdb.Send(cctx, c, gdb.BreakInsert(gdb.InsertArgs(&plain, false)...)); err != nil {
		return unresolvedError(bp, msg)
	}
	if bp.Condition == "" {
		// Only the thread restriction was added; gdb refused it.
		return bp.LocationError("gdb cannot set a thread condition at %q: %s", bp.Location, msg)
	}
	return bp.ConditionError("gdb cannot parse the condition at %q: %s", bp.Location, msg)
}

// loadLibrarySymbols has the gdb that checks locations read the symbols of
// the libraries binary links, so that a location in one of them resolves
// before the program runs. Best effort: a library gdb cannot read is left
// out.
func loadLibrarySymbols(ctx context.Context, c *mi.Client, binary string, attach int, dir string, env []string, timeout time.Duration) {
	libs := preflight.LinkedLibraries(ctx, binary, dir, env)
	if attach != 0 {
		libs = append(libs, loadedLibraries(attach, binary, libs)...)
	}
	for _, lib := range libs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		gdb.Send(cctx, c, gdb.Console(fmt.Sprintf("add-symbol-file %q", lib)))
		cancel()
	}
}

// loadedLibraries returns the files with code that process pid has mapped
// (/proc/PID/maps) other than binary and the libraries of have: those it
// loaded with dlopen. A path is read through the process's root, as the
// process sees it.
func loadedLibraries(pid int, binary string, have []string) []string {
	maps, err := proc.Maps(pid)
	if err != nil {
		return nil
	}
	seen := map[string]bool{binary: true}
	for _, l := range have {
		seen[l] = true
	}
	var out []string
	for _, m := range maps {
		if !strings.Contains(m.Perms, "x") || !strings.HasPrefix(m.Path, "/") || m.Deleted || seen[m.Path] {
			continue
		}
		seen[m.Path] = true
		path := m.Path
		if _, err := os.Stat(path); err != nil {
			path = fmt.Sprintf("/proc/%d/root%s", pid, m.Path)
		}
		out = append(out, path)
	}
	return out
}
