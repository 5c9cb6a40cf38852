package fsutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// ReadOptions say what a reader accepts of a path.
type ReadOptions struct {
	// What names the file in messages: "massif file", "run.json".
	What string
	// Pipes accepts a FIFO or a pipe (a shell's <(...)) besides a
	// regular file: the reader streams what the writer sends.
	Pipes bool
	// Limit, when above 0, is the most bytes read: a longer regular file
	// is refused before it is read, a longer stream once it passes the
	// limit.
	Limit int64
}

// NotFileError is a path that names neither a regular file nor, where
// accepted, a pipe: a directory, a device (/dev/zero) or a socket.
type NotFileError struct {
	Path, What string
	Mode       fs.FileMode
	Pipes      bool // pipes were accepted
}

func (e *NotFileError) Error() string { return e.Path + " " + e.Reason() }

// Reason is the error without the path: "is a directory, not a regular
// file".
func (e *NotFileError) Reason() string {
	want := "a regular file"
	if e.Pipes {
		want = "a regular file or a pipe"
	}
	return fmt.Sprintf("is %s, not %s", kindOf(e.Mode), want)
}

// TooLargeError is a file longer than ReadOptions.Limit.
type TooLargeError struct {
	Path, What string
	Limit      int64
}

func (e *TooLargeError) Error() string {
	if e.What == "" {
		return fmt.Sprintf("%s is larger than %s", e.Path, sizeString(e.Limit))
	}
	return fmt.Sprintf("%s is larger than %s, too large for a %s", e.Path, sizeString(e.Limit), e.What)
}

// InterruptedError is what Open and a read return once the context is
// done: it says so in a word and wraps the context's error. snapctl maps
// it to its interrupted exit code.
type InterruptedError struct{ Err error }

func (e *InterruptedError) Error() string { return "interrupted" }
func (e *InterruptedError) Unwrap() error { return e.Err }

// kindOf names the kind of file a mode is.
func kindOf(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	}
	return "not a regular file"
}

func sizeString(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// File is a file opened by Open. Its reads end with ctx's error once ctx
// is done, and stop at the limit.
type File struct {
	f     *os.File
	ctx   context.Context
	path  string
	what  string
	limit int64 // 0: none
	n     int64 // bytes read so far
	pipe  bool
	stop  func() bool
}

// Open opens path for reading as a file the user named: it refuses what is
// not a regular file or, with opts.Pipes, a pipe, without reading it or
// waiting on it (a device such as /dev/zero, a directory, a FIFO where no
// pipe is accepted), and returns a File whose reads give up when ctx ends,
// at any point, even in a pipe whose writer never writes.
//
// A FIFO without a writer is waited for, as cat does, until a writer
// comes or ctx ends.
func Open(ctx context.Context, path string, opts ReadOptions) (*File, error) {
	if err := ctx.Err(); err != nil {
		return nil, &InterruptedError{err}
	}
	var f *os.File
	if fi, err := os.Stat(path); err == nil && fi.Mode()&fs.ModeNamedPipe != 0 && opts.Pipes {
		f, err = openFIFO(ctx, path)
		if err != nil {
			return nil, err
		}
	} else {
		// O_NONBLOCK: should path be a FIFO after all (replaced since
		// the stat), the open must not wait for a writer inside the
		// kernel, deaf to signals; fstat then refuses it.
		f, err = os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			return nil, err
		}
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	mode := fi.Mode()
	pipe := mode&fs.ModeNamedPipe != 0 && opts.Pipes
	switch {
	case mode.IsRegular():
		if opts.Limit > 0 && fi.Size() > opts.Limit {
			f.Close()
			return nil, &TooLargeError{Path: path, What: opts.What, Limit: opts.Limit}
		}
	case pipe:
	default:
		f.Close()
		return nil, &NotFileError{Path: path, What: opts.What, Mode: mode, Pipes: opts.Pipes}
	}
	r := &File{f: f, ctx: ctx, path: path, what: opts.What, limit: opts.Limit, pipe: pipe}
	if pipe {
		// A pipe's reads wait in Go's poller, which a deadline ends.
		r.stop = context.AfterFunc(ctx, func() { f.SetReadDeadline(time.Unix(1, 0)) })
	}
	return r, nil
}

// openFIFO opens the FIFO at path for reading once a writer has opened it,
// as a blocking open does, but gives up when ctx ends. The open waits
// aside; a reader waiting in open counts as the FIFO's reader, so opening
// the FIFO for writing without blocking then succeeds, and lets it return.
func openFIFO(ctx context.Context, path string) (*os.File, error) {
	type opened struct {
		f   *os.File
		err error
	}
	done := make(chan opened, 1)
	go func() {
		f, err := os.Open(path)
		done <- opened{f, err}
	}()
	select {
	case o := <-done:
		return o.f, o.err
	case <-ctx.Done():
	}
	// The goroutine may not have reached its open yet (ENXIO: no reader):
	// try again for a while rather than leave it waiting.
	for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		select {
		case o := <-done:
			if o.f != nil {
				o.f.Close()
			}
			return nil, &InterruptedError{ctx.Err()}
		default:
		}
	}
	return nil, &InterruptedError{ctx.Err()}
}

// Read reads from the file; once ctx is done it returns an
// *InterruptedError, and past the limit a *TooLargeError.
func (r *File) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, &InterruptedError{err}
	}
	if r.limit > 0 {
		if r.n > r.limit {
			return 0, &TooLargeError{Path: r.path, What: r.what, Limit: r.limit}
		}
		if rest := r.limit + 1 - r.n; int64(len(p)) > rest {
			p = p[:rest]
		}
	}
	n, err := r.f.Read(p)
	r.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) && r.ctx.Err() != nil {
		return n, &InterruptedError{r.ctx.Err()}
	}
	if r.limit > 0 && r.n > r.limit {
		return n - int(r.n-r.limit), &TooLargeError{Path: r.path, What: r.what, Limit: r.limit}
	}
	return n, err
}

// Close closes the file.
func (r *File) Close() error {
	if r.stop != nil {
		r.stop()
	}
	return r.f.Close()
}

// ReadFile reads the whole file at path as Open accepts it.
func ReadFile(ctx context.Context, path string, opts ReadOptions) ([]byte, error) {
	f, err := Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// Stdin wraps a reader that Open did not open, standard input, so that its
// reads give up once ctx is done. Standard input is not made non-blocking
// (it is the terminal's or the shell's too), so a read that waits is left
// to a goroutine and abandoned when ctx ends; it ends with the process.
func Stdin(ctx context.Context, r io.Reader) io.Reader {
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
			return &File{f: f, ctx: ctx} // a redirected file never waits
		}
	}
	return &ctxReader{ctx: ctx, r: r}
}

type ctxReader struct {
	ctx context.Context
	r   io.Reader
	buf []byte
}

type readResult struct {
	n   int
	err error
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, &InterruptedError{err}
	}
	if len(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	// The goroutine reads into its own buffer: an abandoned read must not
	// write into p after Read has returned.
	buf := c.buf[:len(p)]
	done := make(chan readResult, 1)
	go func() {
		n, err := c.r.Read(buf)
		done <- readResult{n, err}
	}()
	select {
	case res := <-done:
		copy(p, buf[:res.n])
		return res.n, res.err
	case <-c.ctx.Done():
		c.buf = nil // the abandoned read still owns it
		return 0, &InterruptedError{c.ctx.Err()}
	}
}
