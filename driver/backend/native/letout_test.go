package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/gdb"
	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/heaptrack"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestLetOutOwnerless: a thread stopped inside pthread_mutex_lock on
// heaptrack's lock, just after it took the lock word and before it wrote
// itself in as the owner, leaves the lock held with no owner (fact 67).
// gdb's agent then says the lock is busy with thread 0; mark runs that
// thread out of pthread_mutex_lock alone (it then owns the lock), runs it
// on to its unlock and out of it, and has the agent cut: the snapshot
// holds the blocks heaptrack/testdata/churn.c's three allocating threads
// count, give or take the one each may be allocating.
func TestLetOutOwnerless(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	testenv.NoLeftovers(t)
	bin := testenv.Build(t, "../../../heaptrack/testdata/churn.c")
	dir := t.TempDir()
	ctx, cancel := testenv.Context(60 * time.Second)
	defer cancel()
	s, err := startSites("", dir, bin, false)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	client, err := mi.Start(ctx, mi.Options{Args: []string{"--args", bin, "1000"}, Env: append(os.Environ(), testenv.ScopeEnv(t)), Async: true, StartsProgram: true})
	if err != nil {
		t.Fatal(err)
	}
	c := gdb.Open(client, nil, 30*time.Second, nil)
	defer func() {
		if reap := c.Close(true); reap != nil {
			reap()
		}
	}()
	loadAgent(t, ctx, c)
	console := func(cmd string) string {
		t.Helper()
		r, err := c.Send(ctx, "-interpreter-exec", "console", mi.Quote(cmd))
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		return r.Console()
	}
	console("set exec-wrapper " + wrapperOf(s.tools, s.rec.FIFO(), nil))
	console(s.agentSites())
	if _, err := c.Send(ctx, "-break-insert", "-t", "check"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, "-exec-run"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.WaitStopped(ctx); err != nil {
		t.Fatal(err)
	}
	groups, err := c.Send(ctx, "-list-thread-groups")
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(groups.List("groups")[0].String("pid"))
	lock, err := s.lockAddr(pid)
	if err != nil {
		t.Fatal(err)
	}
	// The instruction after pthread_mutex_lock's lock cmpxchg: the lock
	// word is taken, the owner (offset 8) written a few instructions on.
	var after uint64
	insn := regexp.MustCompile(`0x([0-9a-f]+) <[^>]*>:\s+(.*)`)
	took := false
	for _, l := range strings.Split(console("x/40i pthread_mutex_lock"), "\n") {
		m := insn.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		if took {
			after, _ = strconv.ParseUint(m[1], 16, 64)
			break
		}
		took = strings.HasPrefix(m[2], "lock cmpxchg")
	}
	if after == 0 {
		t.Fatal("no lock cmpxchg in pthread_mutex_lock's first 40 instructions")
	}
	// Only where the cmpxchg took the lock (ZF set): one that failed
	// goes on to wait for it.
	r, err := c.Send(ctx, "-break-insert", "-c", mi.Quote(fmt.Sprintf("$rdi == %#x && ((long)$eflags & 0x40) != 0", lock)), fmt.Sprintf("*%#x", after))
	if err != nil {
		t.Fatal(err)
	}
	// What a stop must find: the lock held, by no thread yet. gdb 13
	// once reported the breakpoint in a thread whose cmpxchg had failed,
	// the lock another's (docs/facts.md, fact 105): such a stop is
	// not the case under test, and the program goes on to the next.
	target, err := heaptrack.OpenTarget(pid, s.layout)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	bkpt := r.String("bkpt.number")
	for try := 1; ; try++ {
		if _, err := c.Send(ctx, "-exec-continue"); err != nil {
			t.Fatal(err)
		}
		stop, err := c.WaitStopped(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if stop.String("reason") != "breakpoint-hit" || stop.String("bkptno") != bkpt {
			t.Fatalf("gdb stopped with %s, want a hit of breakpoint %s", stop.MI(), bkpt)
		}
		var busy *heaptrack.BusyError
		_, err = target.Pending()
		if errors.As(err, &busy) && busy.TID == 0 {
			break
		}
		if try == 10 {
			t.Fatalf("heaptrack's lock at the stop: %v, want held by no owner", err)
		}
		regs := strings.TrimSpace(console("p/x $rdi")) + ", " + strings.TrimSpace(console("p $eflags"))
		t.Logf("stop %d: heaptrack's lock %v; the stopped thread's $rdi, $eflags: %s; going on to the next", try, err, regs)
	}
	if _, err := c.Send(ctx, "-break-delete", bkpt); err != nil {
		t.Fatal(err)
	}
	var cut siteCut
	if err := json.Unmarshal([]byte(gdb.LastLine(console("python sites_cut()"))), &cut); err != nil || cut.Busy == nil || *cut.Busy != 0 {
		t.Fatalf("the agent's cut: %+v, %v; want busy with thread 0", cut, err)
	}
	// The stop is another thread's than the holder's, as when a thread
	// hits a breakpoint while heaptrack's timer thread holds the lock:
	// mark leaves that thread selected (fact 159).
	if _, err := c.Send(ctx, "-thread-select", "1"); err != nil {
		t.Fatal(err)
	}
	if err := s.mark(ctx, c, pid, 1, cut); err != nil {
		t.Fatal(err)
	}
	sel, err := c.Send(ctx, "-thread-info")
	if err != nil {
		t.Fatal(err)
	}
	if id := sel.String("current-thread-id"); id != "1" {
		t.Errorf("thread %q selected after the holder was let out, want the stop's, 1", id)
	}
	counted, err := strconv.ParseInt(strings.TrimSpace(evaluate(ctx, t, c, "counts[0] + counts[1] + counts[2]")), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := s.take(ctx, 1, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var blocks int64
	for _, site := range snap.Tree.Children {
		if site.Frame.Function == "churn_alloc" {
			blocks += site.Blocks
		}
	}
	if counted == 0 || blocks < counted || blocks > counted+3 {
		t.Errorf("churn_alloc has %d blocks, the threads count %d", blocks, counted)
	}
}

func evaluate(ctx context.Context, t *testing.T, c *gdb.Conn, expr string) string {
	t.Helper()
	r, err := c.Send(ctx, "-data-evaluate-expression", mi.Quote(expr))
	if err != nil {
		t.Fatalf("%s: %v", expr, err)
	}
	return r.String("value")
}
