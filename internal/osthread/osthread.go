// Package osthread (docs/facts.md, fact 148) runs functions on an operating-system thread of their
// own, one that ends when they return. ptrace ties a tracee to the thread
// that attached it, and the kernel detaches whatever that thread still
// traces when it ends: snapctl leans on that wherever it traces a
// process itself, so that a tracer that gives up mid-way (a thread that
// would not stop, an error) never leaves the program stopped.
package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Go runs f in a new goroutine locked to a thread that is not the
// process's main thread, and ends that thread when f returns.
func Go(f func()) { go run(f) }

// run is Go's goroutine. Go ends the thread of a goroutine that returns
// locked to it, except the process's main thread, which it parks for
// good: a tracer there would never be ended, nor its tracees detached,
// while snapctl runs (a seizure that gave up on a thread in vfork left
// the others stopped so). A goroutine that finds itself on the main
// thread starts f's goroutine while it holds that thread, so that the
// new one cannot be scheduled there, and lets it go once f's goroutine
// has a thread of its own.
func run(f func()) {
	runtime.LockOSThread()
	if unix.Gettid() != unix.Getpid() {
		f()
		return
	}
	locked := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		close(locked)
		f()
	}()
	<-locked
	runtime.UnlockOSThread()
}
