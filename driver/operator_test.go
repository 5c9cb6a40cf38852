package driver

import (
	"strconv"
	"testing"

	"github.com/snapctl/snapctl/driver/backend/native"
	"github.com/snapctl/snapctl/internal/testenv"
)

// A C++ operator of a class template, named in quotes as gdb's manual
// says, resolves and stops on both backends and both stop paths: under
// valgrind every breakpoint is pending until the dynamic loader has run,
// and gdb 13 never resolves a pending quoted operator<< (it keeps the
// closing quote), so snapctl gives gdb the function as an explicit
// location. Four threads shift five values each: 20 hits. (The native
// backend's agent path runs the program without threads here: with
// threads that start and exit, its runs currently fail with gdb's
// "Selected thread is running" or hang after the last hit, with a plain
// location as well.)
func TestRunQuotedOperator(t *testing.T) {
	t.Parallel()
	const src = "testdata/operator.cpp"
	bin := testenv.Build(t, src)
	site := "ns::Box<long>::operator<<(int) (operator.cpp:" + strconv.Itoa(testenv.LineOf(t, src, "the leak: 16 bytes")) + ")"
	const plan = "breakpoints:\n  - name: shift\n    location: \"'ns::Box<long>::operator<<(int)'\"\n"
	for _, backend := range BackendNames() {
		traits, _ := BackendTraits(backend)
		for _, p := range stopPaths {
			t.Run(backend+"/"+p.name, func(t *testing.T) {
				t.Parallel()
				if traits.GDBStarts {
					testenv.MustHave(t, "gdb")
				} else {
					testenv.MustHave(t, "gdb", "valgrind", "vgdb")
				}
				threads, hits := 4, 20
				if backend == native.Name && !p.noAgent {
					threads, hits = 0, 5
				}
				res, err := runSession(t, Options{NoAgent: p.noAgent}, "backend: "+backend+"\n"+plan, bin, "5", strconv.Itoa(threads))
				if err != nil {
					t.Fatal(err)
				}
				m := readManifest(t, res.Dir)
				if m.GdbAgent == p.noAgent {
					t.Errorf("gdb_agent %v with NoAgent %v", m.GdbAgent, p.noAgent)
				}
				if len(m.Breakpoints) != 1 || m.Breakpoints[0].Hits != hits || m.Breakpoints[0].Snapshots != hits {
					t.Fatalf("breakpoints %+v, want shift with %d hits and as many snapshots", m.Breakpoints, hits)
				}
				for _, s := range m.Stops {
					if s.Frame.Function != "ns::Box<long>::operator<<" {
						t.Fatalf("stop %d in %+v, want ns::Box<long>::operator<<", s.Seq, s.Frame)
					}
				}
				if !traits.Sites {
					return
				}
				// Between two hits one call ran: 16 bytes at the operator.
				// (Threads that start meanwhile allocate their TLS.)
				var op *suspectFigures
				for _, s := range figuresOf(m.Suspects) {
					if s.Site == site {
						op = &s
					}
				}
				if op == nil || op.PerHit != 16 || op.Total != 19*16 || op.Growing != 19 {
					t.Errorf("suspects %+v, want the operator at 16 B per hit, 304 B in all", m.Suspects)
				}
			})
		}
	}
}
