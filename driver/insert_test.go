package driver

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/driver/backend/massif"
	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/plan"
)

func TestBreakInsertArgs(t *testing.T) {
	for _, tt := range []struct {
		b    plan.Breakpoint
		want []string
	}{
		{plan.Breakpoint{Location: "main"}, []string{"main"}},
		{plan.Breakpoint{Location: "f", Skip: 3}, []string{"-i", "3", "f"}},
		{plan.Breakpoint{Location: "f", Thread: 2}, []string{"-c", `"$_thread == 2"`, "f"}},
		{plan.Breakpoint{Location: "f", Condition: "x>1"}, []string{"-c", "x>1", "f"}},
		{plan.Breakpoint{Location: "f", Condition: `s[0] == '"'`, Thread: 4, Skip: 1},
			[]string{"-i", "1", "-c", `"$_thread == 4 && (s[0] == '\"')"`, "f"}},
		{plan.Breakpoint{Location: "-source a.c -line 3"}, []string{"--source", "a.c", "--line", "3"}},
		{plan.Breakpoint{Location: "-func ns::f(int, char) -qualified", Skip: 1}, []string{"-i", "1", "--function", `"ns::f(int, char)"`, "--qualified"}},
		{plan.Breakpoint{Location: "Scheduler::submit(int, char)"}, []string{`"Scheduler::submit(int, char)"`}},
		// A quoted function becomes an explicit one, without its quotes.
		{plan.Breakpoint{Location: "'ns::Box<long>::operator<<(int)'"}, []string{"--function", "ns::Box<long>::operator<<(int)"}},
		{plan.Breakpoint{Location: "'ns::f(int, char)'", Skip: 2}, []string{"-i", "2", "--function", `"ns::f(int, char)"`}},
		{plan.Breakpoint{Location: "'leak.c':12"}, []string{`"'leak.c':12"`}},
		// Every, MaxHits and AroundCall belong to the stop loop.
		{plan.Breakpoint{Location: "f", Every: 5, MaxHits: 10, AroundCall: true}, []string{"f"}},
	} {
		if diff := cmp.Diff(tt.want, gdb.BreakInsertArgs(&tt.b)); diff != "" {
			t.Errorf("%+v: breakInsertArgs (-want +got):\n%s", tt.b, diff)
		}
	}
}

// The plan's valgrind section as valgrind's options, for the plan that
// sets every key.
func TestMassifPlanArgs(t *testing.T) {
	p, err := plan.Load(filepath.Join("..", "testdata", "plans", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"--threshold=0.5", "--depth=40", "--pages-as-heap=yes", "--stacks=yes",
		"--alloc-fn=xmalloc", "--alloc-fn=xcalloc", "--ignore-fn=pool_grow",
		"--fair-sched=try", "--max-snapshots=200", "--trace-children=no",
	}
	if diff := cmp.Diff(want, massif.PlanArgs(p)); diff != "" {
		t.Errorf("PlanArgs (-want +got):\n%s", diff)
	}
	if got := massif.PlanArgs(mustPlan(t, "breakpoints:\n  - name: f\n    location: f\n")); !cmp.Equal(got, []string{"--threshold=0", "--fair-sched=yes"}) {
		t.Errorf("PlanArgs of a bare plan = %q", got)
	}
}

// The -break-insert arguments, inserted into a real gdb on a compiled C++
// fixture: gdb understands each location, condition and ignore count as
// meant.
func TestBreakInsertArgsInGdb(t *testing.T) {
	testenv.MustHave(t, "gdb")
	testenv.NoLeftovers(t)
	t.Parallel()
	bin := testenv.Build(t, "testdata/locations.cpp")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := mi.Start(ctx, mi.Options{Args: []string{bin}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tt := range []struct {
		b              plan.Breakpoint
		function, line string
		cond, ignore   string
	}{
		{b: plan.Breakpoint{Location: "handle_request"}, function: "handle_request(int)"},
		{b: plan.Breakpoint{Location: "locations.cpp:16", Condition: `id % 10 == 0`, Skip: 2},
			function: "handle_request(int)", line: "16", cond: "id % 10 == 0", ignore: "2"},
		{b: plan.Breakpoint{Location: "Scheduler::submit(int)", Thread: 1, Condition: "job > 3"},
			function: "Scheduler::submit(int)", cond: "$_thread == 1 && (job > 3)"},
		{b: plan.Breakpoint{Location: "ns::f(int, char)"}, function: "ns::f(int, char)"},
		{b: plan.Breakpoint{Location: "'ns::f(int, char)'"}, function: "ns::f(int, char)"},
		{b: plan.Breakpoint{Location: "-source locations.cpp -line 17", Condition: `queue_len != 1`},
			function: "handle_request(int)", line: "17", cond: "queue_len != 1"},
		{b: plan.Breakpoint{Location: "-function ns::f(int, char) -qualified"}, function: "ns::f(int, char)"},
	} {
		r, err := c.Send(ctx, "-break-insert", gdb.BreakInsertArgs(&tt.b)...)
		if err != nil {
			t.Errorf("%q: %v", tt.b.Location, err)
			continue
		}
		got := []string{r.String("bkpt.func"), r.String("bkpt.line"), r.String("bkpt.cond"), r.String("bkpt.ignore")}
		want := []string{tt.function, tt.line, tt.cond, tt.ignore}
		if tt.line == "" {
			want[1] = got[1] // any line of the function
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%q: gdb's func, line, cond, ignore (-want +got):\n%s", tt.b.Location, diff)
		}
	}
}

// TestValgrindAcceptsPlanArgs runs the real valgrind with the options of a
// plan that sets every valgrind key, so a misspelt option would fail here
// rather than in a user's run.
func TestValgrindAcceptsPlanArgs(t *testing.T) {
	testenv.MustHave(t, "valgrind")
	testenv.NoLeftovers(t)
	p, err := plan.Load(filepath.Join("..", "testdata", "plans", "full.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "massif.out")
	ctx, cancel := testenv.Context(60 * time.Second)
	defer cancel()
	// A private vgdb prefix: valgrind's FIFOs stay out of /tmp, where other
	// runs look for their own.
	args := append([]string{"--tool=massif", "--massif-out-file=" + out, "--vgdb-prefix=" + filepath.Join(t.TempDir(), "vgdb")}, massif.PlanArgs(p)...)
	args = append(args, "/bin/true")
	cmd := exec.CommandContext(ctx, "valgrind", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("valgrind %q: %v\n%s", args, err, stderr.String())
	}
}
