package driver

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
			s.groups.Kill()
			s.sweep()
		case <-done:
		}
	}()
	return func() { close(done) }
}
