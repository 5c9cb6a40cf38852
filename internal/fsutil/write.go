// Package fsutil reads and writes the files a user names on the command
// line the way a user expects of such a path.
package fsutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxLinks bounds the symbolic links followed from one path, as the
// kernel's ELOOP does.
const maxLinks = 40

// WriteFile writes what write streams to path.
//
// A path that does not exist yet, or names a regular file, is replaced
// atomically: write goes to a temporary file in the same directory, which
// is synced and renamed over path, so a reader sees the old file or the
// whole new one, and a failed write leaves the old one. An existing file
// keeps its permissions; a new one gets perm.
//
// Anything else at path is the user's, and is written through, never
// replaced: a symbolic link is followed to its target (which is then
// written by the same rules, created when the link dangles), and a FIFO,
// a character or block device or a socket is opened and written in place,
// as a shell's redirection would.
func WriteFile(path string, perm fs.FileMode, write func(io.Writer) error) error {
	target, fi, err := resolve(path)
	if err == nil && fi != nil && !fi.Mode().IsRegular() {
		err = writeInPlace(target, fi, write)
	} else if err == nil {
		err = replace(target, fi, perm, write)
	}
	if err != nil {
		// The path in an *fs.PathError is path again, or the
		// temporary file's: the message names path once.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// resolve follows the symbolic links at path and returns the path they
// lead to, with its Lstat, or a nil FileInfo when nothing is there.
func resolve(path string) (string, fs.FileInfo, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return path, nil, nil
		case err != nil:
			return "", nil, err
		case fi.Mode()&fs.ModeSymlink == 0:
			return path, fi, nil
		}
		link, err := os.Readlink(path)
		if err != nil {
			return "", nil, err
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(path), link)
		}
		path = link
	}
	return "", nil, fmt.Errorf("more than %d symbolic links", maxLinks)
}

// writeInPlace writes to a file that is not a regular one: a FIFO, a
// device, a socket.
func writeInPlace(path string, fi fs.FileInfo, write func(io.Writer) error) error {
	if fi.IsDir() {
		return errors.New("is a directory")
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// replace writes path through a temporary file and a rename. old is the
// regular file at path, nil when there is none.
func replace(path string, old fs.FileInfo, perm fs.FileMode, write func(io.Writer) error) error {
	if old != nil {
		perm = old.Mode().Perm()
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	bw := bufio.NewWriter(f)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, perm)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
