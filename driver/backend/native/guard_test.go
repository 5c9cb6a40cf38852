package native

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// TestRemotePackets: the guard's side of gdb's remote protocol over a
// socket pair, as gdbserver's connection is: a packet goes out with its
// checksum, and a reply that arrives in pieces, after other packets, is
// read whole.
func TestRemotePackets(t *testing.T) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	syscall.SetNonblock(fds[0], true)
	ours, theirs := os.NewFile(uintptr(fds[0]), "guard"), os.NewFile(uintptr(fds[1]), "gdbserver")
	defer ours.Close()
	defer theirs.Close()
	r := &remote{f: ours}
	if err := r.send("z0,55c47277116d,1"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, _ := theirs.Read(buf)
	// '$' body '#' and the sum of the body's bytes modulo 256, in hex.
	if got, want := string(buf[:n]), "$z0,55c47277116d,1#07"; got != want {
		t.Errorf("sent %q, want %q", got, want)
	}
	go func() {
		theirs.Write([]byte("$T05swbreak:;thread:p1e3.1e3;#00$O"))
		time.Sleep(20 * time.Millisecond)
		theirs.Write([]byte("K#9a"))
	}()
	for _, want := range []string{"T05swbreak:;thread:p1e3.1e3;", "OK"} {
		if got, err := r.packet(time.Now().Add(5 * time.Second)); err != nil || got != want {
			t.Errorf("packet %q, %v; want %q", got, err, want)
		}
	}
	if got, err := r.packet(time.Now().Add(50 * time.Millisecond)); err == nil {
		t.Errorf("packet %q with nothing sent, want a timeout", got)
	}
}

// TestGuardHoldNoServer: a gdb that started no gdbserver leaves nothing
// to hold, said so; the guard then holds no connection, and release says
// that too rather than speak to nothing.
func TestGuardHoldNoServer(t *testing.T) {
	g := &guard{pid: os.Getpid(), conn: -1}
	if err := g.hold(os.Getpid()); err == nil || err.Error() != "gdb has no gdbserver child" {
		t.Errorf("hold: %v", err)
	}
	if g.tracing() {
		t.Errorf("a guard with no gdbserver says it traces")
	}
	if _, err := g.release(nil, 1, time.Second); err == nil {
		t.Errorf("release without a connection: no error")
	}
}
