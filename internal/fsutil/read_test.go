package fsutil

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// What is not a regular file (or, where accepted, a pipe) is refused at
// once, with what it is: nothing is read from /dev/zero, a directory, a
// socket, a FIFO where pipes are not accepted.
func TestOpenRefusesOddFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path  string
		pipes bool
		want  string
	}{
		{"/dev/zero", true, "/dev/zero is a character device, not a regular file or a pipe"},
		{"/dev/zero", false, "/dev/zero is a character device, not a regular file"},
		{dir, true, dir + " is a directory, not a regular file or a pipe"},
		{fifo, false, fifo + " is a FIFO, not a regular file"},
	} {
		start := time.Now()
		f, err := Open(context.Background(), tt.path, ReadOptions{What: "run.json", Pipes: tt.pipes})
		var nf *NotFileError
		if !errors.As(err, &nf) || err.Error() != tt.want {
			t.Errorf("Open(%s, pipes %v) = %v, want %q", tt.path, tt.pipes, err, tt.want)
		}
		if f != nil {
			f.Close()
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("Open(%s) took %v", tt.path, d)
		}
	}
}

// A regular file longer than the limit is refused before it is read: a
// sparse file of a terabyte costs nothing.
func TestOpenHugeFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "huge")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse file of 1 TiB here: %v", err)
	}
	f.Close()
	_, err = ReadFile(context.Background(), path, ReadOptions{What: "plan", Limit: 1 << 20})
	var tl *TooLargeError
	if !errors.As(err, &tl) || err.Error() != path+" is larger than 1 MiB, too large for a plan" {
		t.Errorf("ReadFile = %v, want too large", err)
	}
	// Exactly at the limit is fine.
	if err := os.WriteFile(path, []byte(strings.Repeat("x", 1<<10)), 0o644); err != nil {
		t.Fatal(err)
	}
	data, err := ReadFile(context.Background(), path, ReadOptions{What: "plan", Limit: 1 << 10})
	if err != nil || len(data) != 1<<10 {
		t.Errorf("ReadFile at the limit = %d bytes, %v", len(data), err)
	}
}

// A pipe is read up to the limit, then refused: a writer that never stops
// does not fill memory.
func TestOpenPipeLimit(t *testing.T) {
	fifo := mkfifo(t)
	go func() {
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		defer w.Close()
		buf := make([]byte, 64<<10)
		for {
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}()
	data, err := ReadFile(context.Background(), fifo, ReadOptions{What: "plan", Pipes: true, Limit: 1 << 20})
	var tl *TooLargeError
	if !errors.As(err, &tl) {
		t.Errorf("ReadFile of an endless pipe = %d bytes, %v; want too large", len(data), err)
	}
	if len(data) > 1<<20 {
		t.Errorf("read %d bytes, more than the limit", len(data))
	}
}

// A FIFO is waited for until its writer comes, then read to its end.
func TestOpenFIFOWaitsForWriter(t *testing.T) {
	fifo := mkfifo(t)
	go func() {
		time.Sleep(100 * time.Millisecond)
		w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.WriteString("desc: late\n")
		w.Close()
	}()
	data, err := ReadFile(context.Background(), fifo, ReadOptions{What: "massif file", Pipes: true})
	if err != nil || string(data) != "desc: late\n" {
		t.Errorf("ReadFile = %q, %v", data, err)
	}
}

// Cancelling the context ends a reader at any point: waiting for a FIFO's
// writer, in a read that waits for data, between the reads of a regular
// file, on standard input.
func TestOpenCancel(t *testing.T) {
	t.Run("no writer", func(t *testing.T) {
		fifo := mkfifo(t)
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := Open(ctx, fifo, ReadOptions{Pipes: true})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Open = %v, want context.Canceled", err)
		}
	})
	t.Run("silent writer", func(t *testing.T) {
		fifo := mkfifo(t)
		opened := make(chan *os.File, 1)
		go func() {
			w, _ := os.OpenFile(fifo, os.O_WRONLY, 0)
			w.WriteString("desc: x\n")
			opened <- w
		}()
		ctx, cancel := context.WithCancel(context.Background())
		f, err := Open(ctx, fifo, ReadOptions{Pipes: true})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := <-opened
		defer w.Close()
		buf := make([]byte, 100)
		if n, err := f.Read(buf); err != nil || string(buf[:n]) != "desc: x\n" {
			t.Fatalf("first read = %q, %v", buf[:n], err)
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := f.Read(buf); !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("regular file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(path, make([]byte, 1<<16), 0o644); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		f, err := Open(ctx, path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<10)
		if _, err := f.Read(buf); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := f.Read(buf); !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel = %v, want context.Canceled", err)
		}
	})
	t.Run("stdin", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		ctx, cancel := context.WithCancel(context.Background())
		in := Stdin(ctx, r)
		w.WriteString("abc")
		buf := make([]byte, 10)
		if n, err := in.Read(buf); err != nil || string(buf[:n]) != "abc" {
			t.Fatalf("first read = %q, %v", buf[:n], err)
		}
		time.AfterFunc(100*time.Millisecond, cancel)
		if _, err := in.Read(buf); !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel = %v, want context.Canceled", err)
		}
		w.Close() // ends the abandoned read
		if _, err := io.ReadAll(in); !errors.Is(err, context.Canceled) {
			t.Errorf("read after cancel = %v, want context.Canceled", err)
		}
	})
}

func mkfifo(t *testing.T) string {
	t.Helper()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo
}

// A writer that writes everything and leaves before the reader reads, or
// leaves without writing: the reader gets the data, or an empty file, and
// does not wait for another writer.
func TestOpenFIFOWriterLeaves(t *testing.T) {
	for _, data := range []string{"desc: quick\n", ""} {
		fifo := mkfifo(t)
		written := make(chan struct{})
		go func() {
			defer close(written)
			w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
			if err != nil {
				return
			}
			w.WriteString(data)
			w.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		f, err := Open(ctx, fifo, ReadOptions{Pipes: true})
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		<-written
		got, err := io.ReadAll(f)
		f.Close()
		cancel()
		if err != nil || string(got) != data {
			t.Errorf("read %q, %v; want %q", got, err, data)
		}
	}
}
