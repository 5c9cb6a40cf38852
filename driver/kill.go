package driver

import (
	"sync"
	"syscall"
)

// processGroups records the process groups of a session's children (each
// child leads its own) so that they can all be killed from another
// goroutine.
type processGroups struct {
	mu   sync.Mutex
	pids []int
}

func (g *processGroups) add(pid int) {
	g.mu.Lock()
	g.pids = append(g.pids, pid)
	g.mu.Unlock()
}

// kill sends SIGKILL to every group.
func (g *processGroups) kill() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, pid := range g.pids {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
}

// killOn kills every child when kill is closed, until the returned
// function is called.
func (s *session) killOn(kill <-chan struct{}) (stop func()) {
	if kill == nil {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-kill:
			s.groups.kill()
			s.sweep()
		case <-done:
		}
	}()
	return func() { close(done) }
}
