package driver

import (
	"io"
	"os"
	"strings"
	"sync"
)

// tailWriter passes everything on to w and keeps the last bytes written,
// so that a message can quote what a child said on its stderr, which the
// user's terminal also got (valgrind writes there what stops it before
// its log file is open: a bad option, a log file it cannot create).
type tailWriter struct {
	w   io.Writer
	max int

	mu   sync.Mutex
	tail []byte
}

// tailMax is how much of a child's stderr a tailWriter keeps.
const tailMax = 4096

func newTailWriter(w io.Writer, max int) *tailWriter {
	return &tailWriter{w: w, max: max}
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	t.mu.Unlock()
	return t.w.Write(p)
}

// lines returns the last n complete or partial lines kept.
func (t *tailWriter) lines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(t.tail), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// sameFile reports whether a and b write to the same place: the same
// writer, or open files on one inode (a shell's 2>&1).
func sameFile(a, b io.Writer) bool {
	if a == b {
		return true
	}
	fa, oka := a.(*os.File)
	fb, okb := b.(*os.File)
	if !oka || !okb || fa == nil || fb == nil {
		return false
	}
	sa, erra := fa.Stat()
	sb, errb := fb.Stat()
	return erra == nil && errb == nil && os.SameFile(sa, sb)
}
