package testenv

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The waits of the tests are hang guards: a test waits for a condition
// (gdb started, a snapshot written, the last run.json), and gives up only
// when it will never hold. A guard fixed in seconds is right on a quiet
// machine and wrong on a loaded one: on two cores at load average 20 to 25
// gdb took more than 30 s to start under a run, and the last run.json of a
// 1,600-stop run more than 30 s to be written, and both tests failed with
// nothing broken. A Deadline stretches its timeout by Patience, read
// again at every check, so that a wait that began on a quiet machine
// still stretches when the load comes.

// maxPatience bounds Patience: a guard of 30 s waits at most 10 minutes, and
// a test that truly hangs still fails well before go test's -timeout.
const maxPatience = 20

var patience struct {
	sync.Mutex
	at     time.Time
	factor float64
}

// Patience is how many times longer than on a quiet machine a wait may take
// now: the machine's load per processor (the greater of the last minute's
// load average and the tasks runnable this instant), at least 1 and at
// most 20. It is read from /proc/loadavg at most every 250 ms.
func Patience() float64 {
	patience.Lock()
	defer patience.Unlock()
	if time.Since(patience.at) < 250*time.Millisecond {
		return patience.factor
	}
	patience.at = time.Now()
	patience.factor = loadFactor()
	return patience.factor
}

// loadFactor reads /proc/loadavg.
func loadFactor() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	return loadFactorOf(string(data), runtime.NumCPU())
}

// loadFactorOf is Patience for a /proc/loadavg of "0.52 0.58 0.59 3/1123
// 4567" (the load averages over 1, 5 and 15 minutes, then the runnable and
// all tasks) on cpus processors.
func loadFactorOf(loadavg string, cpus int) float64 {
	f := strings.Fields(loadavg)
	load := 0.0
	if len(f) > 0 {
		load, _ = strconv.ParseFloat(f[0], 64)
	}
	if len(f) > 3 {
		if running, _, ok := strings.Cut(f[3], "/"); ok {
			// The runnable count includes the reader itself.
			if n, err := strconv.Atoi(running); err == nil && float64(n-1) > load {
				load = float64(n - 1)
			}
		}
	}
	return min(max(1, load/float64(max(cpus, 1))), maxPatience)
}

// Scaled is d stretched by the machine's Patience now.
func Scaled(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Patience())
}

// Deadline is a hang guard of a wait: its timeout is what the wait takes
// at most on a quiet machine, stretched by Patience at each check.
type Deadline struct {
	start   time.Time
	timeout time.Duration
}

// NewDeadline starts a guard of timeout (on a quiet machine) now.
func NewDeadline(timeout time.Duration) Deadline {
	return Deadline{start: time.Now(), timeout: timeout}
}

// Passed reports whether the wait has lasted longer than its timeout
// stretched by the machine's load now.
func (d Deadline) Passed() bool {
	return time.Since(d.start) > Scaled(d.timeout)
}

// Waited is how long the wait has lasted, for messages.
func (d Deadline) Waited() time.Duration {
	return time.Since(d.start).Round(time.Millisecond)
}

// String says how long the wait lasted, and its timeout on a quiet
// machine, for a failure's message.
func (d Deadline) String() string {
	return d.Waited().String() + " (" + d.timeout.String() + " on a quiet machine, load " + strconv.FormatFloat(Patience(), 'f', 1, 64) + " per processor now)"
}

// WaitUntil polls cond every interval until it holds; it fails the test,
// naming what it waited for, once a Deadline of timeout has passed.
func WaitUntil(t testing.TB, what string, timeout, interval time.Duration, cond func() bool) {
	t.Helper()
	for d := NewDeadline(timeout); !cond(); time.Sleep(interval) {
		if d.Passed() {
			t.Fatalf("waited %v for %s", d, what)
		}
	}
}

// Context is a context cancelled once a Deadline of timeout has passed, for
// a command a test bounds (exec.CommandContext): timeout on a quiet
// machine, longer on a loaded one.
func Context(timeout time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		deadline := NewDeadline(timeout)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for !deadline.Passed() {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
		cancel()
	}()
	return ctx, cancel
}
