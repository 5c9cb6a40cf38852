package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// markEnv is the environment variable MarkRun sets; every process of a
// run inherits it, whichever session or process group it moved to.
const markEnv = "SNAPCTL_TEST_RUN"

var marks atomic.Int64

// MarkRun returns an environment entry (NAME=VALUE) unique to this call.
// Give it to one snapctl run: its gdb, vgdb and valgrind inherit it, so
// that tests running in parallel each check their own processes. It
// registers a cleanup that fails the test if a valgrind, vgdb or gdb
// carrying the mark is alive a few seconds after the test ended, and then
// kills it.
func MarkRun(t testing.TB) string {
	t.Helper()
	entry := fmt.Sprintf("%s=%d-%d", markEnv, os.Getpid(), marks.Add(1))
	t.Cleanup(func() {
		var left []Proc
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			left = Marked(entry, isTool)
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(left) == 0 {
			return
		}
		t.Errorf("processes of the run left behind:\n%s", describeProcs(left))
		for _, p := range left {
			syscall.Kill(p.PID, syscall.SIGKILL)
		}
		ReapOrphans()
	})
	return entry
}

// Marked returns the live processes whose environment holds entry and for
// which match is true (nil matches all).
func Marked(entry string, match func(Proc) bool) []Proc {
	want := []byte(entry)
	var out []Proc
	for _, p := range readProcs() {
		if p.State == "Z" || p.PID == os.Getpid() || (match != nil && !match(p)) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p.PID), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.Equal(kv, want) {
				out = append(out, p)
				break
			}
		}
	}
	return out
}
