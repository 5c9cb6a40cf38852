package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// spool keeps a run's records on disk as JSON lines while the run goes on,
// so that snapctl's memory does not grow with the number of stops:
// run.json is written at the end by streaming the lines into it. Writes
// are buffered and never synced; the file is removed by close.
type spool struct {
	dir  string // where the file is made; "" for the system's temp dir
	name string // file name pattern, for os.CreateTemp
	f    *os.File
	w    *bufio.Writer
	n    int   // records written
	err  error // the first write error; it sticks
}

func newSpool(name string) *spool { return &spool{name: name} }

// add appends one record, encoded as JSON on one line. A failure is kept
// and returned by each: a run does not end because its spool failed.
func (s *spool) add(v any) {
	if s.err != nil {
		return
	}
	if s.f == nil {
		f, err := os.CreateTemp(s.dir, s.name)
		if err != nil {
			s.err = fmt.Errorf("creating spool file: %w", err)
			return
		}
		s.f, s.w = f, bufio.NewWriterSize(f, 64<<10)
	}
	data, err := json.Marshal(v)
	if err != nil {
		s.err = fmt.Errorf("encoding %s record %d: %w", s.name, s.n+1, err)
		return
	}
	s.w.Write(data)
	if err := s.w.WriteByte('\n'); err != nil {
		s.err = fmt.Errorf("writing spool file: %w", err)
		return
	}
	s.n++
}

// len returns the number of records written.
func (s *spool) len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// each calls fn with every record in the order added, each a line of
// compact JSON without its newline. The slice is only valid during the
// call.
func (s *spool) each(fn func(line []byte) error) error {
	if s == nil {
		return nil
	}
	// A spool whose file could not be made holds no records but must not
	// pass for an empty one: run.json would silently lack them.
	if s.err != nil {
		return s.err
	}
	if s.n == 0 {
		return nil
	}
	if s.w != nil {
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("writing spool file: %w", err)
		}
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("reading spool file: %w", err)
	}
	// Seek back to the end whatever happens, so that records added later
	// follow the others.
	defer s.f.Seek(0, io.SeekEnd)
	r := bufio.NewReaderSize(s.f, 64<<10)
	for i := 0; i < s.n; i++ {
		line, err := r.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("reading spool file: record %d: %w", i+1, err)
		}
		if err := fn(bytes.TrimSuffix(line, []byte{'\n'})); err != nil {
			return err
		}
	}
	return nil
}

// view returns a spool that reads the records written so far through a
// file descriptor of its own, while s goes on taking records: each of the
// view reads only those. Records written are flushed first. The view is
// closed with closeView; nil for a nil spool.
func (s *spool) view() (*spool, error) {
	if s == nil {
		return nil, nil
	}
	v := &spool{name: s.name, n: s.n, err: s.err}
	if s.err != nil || s.n == 0 {
		return v, nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("writing spool file: %w", err)
	}
	f, err := os.Open(s.f.Name())
	if err != nil {
		return nil, fmt.Errorf("reading spool file: %w", err)
	}
	v.f = f
	return v, nil
}

// closeView closes a view's file descriptor; the file stays its spool's.
func (s *spool) closeView() {
	if s != nil && s.f != nil {
		s.f.Close()
	}
}

// close removes the spool's file.
func (s *spool) close() {
	if s == nil || s.f == nil {
		return
	}
	s.f.Close()
	os.Remove(s.f.Name())
	s.f, s.w = nil, nil
}
