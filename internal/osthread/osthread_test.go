package osthread

import (
	"fmt"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fromMain is where run, begun on the process's main thread, ran its
// function (TestMain).
var fromMain struct {
	began bool // TestMain began on the main thread
	tid   int  // the thread the function ran on
}

func TestMain(m *testing.M) {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		fromMain.began = true
		ran := make(chan int, 1)
		run(func() { ran <- unix.Gettid() })
		fromMain.tid = <-ran
	}
	runtime.UnlockOSThread()
	os.Exit(m.Run())
}

// A function run from the main thread runs on a thread of its own, which
// ends when it returns.
func TestNeverTheMainThread(t *testing.T) {
	if !fromMain.began {
		t.Skip("TestMain did not begin on the process's main thread")
	}
	if fromMain.tid == os.Getpid() {
		t.Fatalf("the function ran on the main thread (%d)", fromMain.tid)
	}
	waitGone(t, fromMain.tid)
}

// Go's threads end with their functions, wherever the goroutine began.
func TestThreadEndsWithTheFunction(t *testing.T) {
	for range 20 {
		ran := make(chan int, 1)
		Go(func() { ran <- unix.Gettid() })
		tid := <-ran
		if tid == os.Getpid() {
			t.Fatalf("the function ran on the main thread (%d)", tid)
		}
		waitGone(t, tid)
	}
}

func waitGone(t *testing.T, tid int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(fmt.Sprintf("/proc/self/task/%d", tid)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("thread %d still runs a minute after its function returned", tid)
		}
	}
}
