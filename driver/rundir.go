package driver

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/snapctl/snapctl/driver/backend"
	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/runjson"
	"github.com/snapctl/snapctl/snapshots"
)

// Names inside a run directory (docs/design.md, "The run directory").
const (
	planFile     = "plan.yaml"
	manifestFile = "run.json"
	reportFile   = "report.md"
	snapshotDir  = backend.SnapshotDir
	traceFile    = "gdb-mi.log"
	agentTrace   = "gdb-agent.jsonl"
)

// DefaultRunDir returns the run directory used when the user names none:
// ./snapctl-runs/YYYYMMDD-HHMMSS-BINARY, made unique with a numeric suffix
// when a run of the same binary started in the same second.
func DefaultRunDir(binary string, now time.Time) string {
	base := unsafeName.ReplaceAllString(filepath.Base(binary), "_")
	name := now.Format("20060102-150405") + "-" + base
	dir := filepath.Join("snapctl-runs", name)
	for i := 2; ; i++ {
		if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
			return dir
		}
		dir = filepath.Join("snapctl-runs", fmt.Sprintf("%s-%d", name, i))
	}
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._+-]+`)

// prepareRunDir creates dir (and its parents) or, when it exists, accepts it
// only if it is an empty directory or force is set. It returns the absolute
// path. The snapshots folder is created inside.
func prepareRunDir(dir string, force bool) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", &OutputDirError{Path: dir, Err: err}
	}
	fi, err := os.Stat(abs)
	switch {
	case err == nil && !fi.IsDir():
		return "", &OutputDirError{Path: dir, Err: errors.New("exists and is not a directory")}
	case err == nil && !force:
		empty, err := isEmptyDir(abs)
		if err != nil {
			return "", &OutputDirError{Path: dir, Err: err}
		}
		if !empty {
			return "", &OutputDirError{Path: dir, Err: errDirNotEmpty}
		}
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return "", &OutputDirError{Path: dir, Err: err}
	}
	if err := os.MkdirAll(filepath.Join(abs, snapshotDir), 0o755); err != nil {
		return "", &OutputDirError{Path: dir, Err: err}
	}
	if force {
		if err := clearRunFiles(abs); err != nil {
			return "", &OutputDirError{Path: dir, Err: err}
		}
	}
	return abs, nil
}

// clearRunFiles removes the files an earlier run left in dir, which would
// otherwise be taken for this run's output: snapctl's own files and the
// snapshots it kept or staged, and what a snapctl killed outright leaves
// (hidden snapshots run.json does not list, spools, half-written
// files). Files snapctl does not write are left alone, and so is what is
// not a regular file under those names (a symlink, a FIFO): the run
// writes through it.
func clearRunFiles(dir string) error {
	names := []string{manifestFile, reportFile, htmlFile, traceFile, agentTrace}
	var snaps []string
	patterns := []string{".stops-*.jsonl", ".events-*.jsonl", ".diffs-*.jsonl", "." + manifestFile + ".tmp-*", "." + reportFile + ".tmp-*", "." + htmlFile + ".tmp-*"}
	for _, b := range backends {
		patterns = append(patterns, b.files...)
	}
	for _, pattern := range patterns {
		more, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return err
		}
		snaps = append(snaps, more...)
	}
	for _, name := range names {
		snaps = append(snaps, filepath.Join(dir, name))
	}
	for _, path := range snaps {
		if fi, err := os.Lstat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

func isEmptyDir(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// writeFileAtomicFunc writes what write streams to path: a regular file
// is replaced through a temporary file and a rename, so a reader never
// sees half a file (a run.json that exists is complete); what is not a
// regular file is written through (see fsutil.WriteFile).
func writeFileAtomicFunc(path string, write func(io.Writer) error) error {
	return fsutil.WriteFile(path, 0o644, write)
}

// newPrivateDir creates the session's private directory: mode 0700, owned by
// the user, with a name free of spaces (docs/facts.md, fact 6: monitor
// command lines are split on spaces), locked for the session's life. It
// holds the vgdb FIFOs (fact 10) and snapshots while massif writes them
// (docs/design.md, "The private directory"). Before that it sweeps what
// dead runs left beside it (sweepDeadRuns). release unlocks it; the caller
// removes it.
func newPrivateDir() (dir string, release func(), err error) {
	dir, err = makePrivateDir(os.TempDir())
	for err == nil && strings.ContainsAny(dir, " \t\n%") {
		// TMPDIR with a space, or a % that valgrind would expand in
		// --vgdb-prefix: fall back to /tmp, which has neither.
		os.RemoveAll(dir)
		dir, err = makePrivateDir("/tmp")
	}
	if err != nil {
		return "", nil, fmt.Errorf("creating private directory: %w", err)
	}
	if release, err = lockPrivateDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("locking private directory: %w", err)
	}
	sweepDeadRuns(filepath.Dir(dir))
	return dir, release, nil
}

func makePrivateDir(tmp string) (string, error) {
	dir, err := os.MkdirTemp(tmp, "snapctl-")
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func unlistedPath(dir, name string) string { return backend.UnlistedPath(dir, name) }

// publish gives the snapshots of the stops of sp from the place from on
// (spool.end), and memcheck's leak searches beside them, their names,
// unlisted until then, in the run directory dir:
// the names are read back from the spooled stops rather than kept, so that
// what the run holds does not grow with the stops taken while run.json,
// longer the more stops it lists, is written (docs/facts.md, fact 123).
func publish(dir string, sp *spool, from mark) error {
	var first error
	err := sp.eachFrom(from, func(line []byte) error {
		var st struct {
			Snapshot string `json:"snapshot"`
			Leak     *struct {
				Records string `json:"records"`
			} `json:"leak"`
		}
		if err := json.Unmarshal(line, &st); err != nil {
			return fmt.Errorf("reading spooled stop: %w", err)
		}
		names := []string{st.Snapshot}
		if st.Leak != nil {
			names = append(names, st.Leak.Records)
		}
		for _, name := range names {
			if name == "" {
				continue
			}
			if err := backend.MoveFile(unlistedPath(dir, name), filepath.Join(dir, name)); err != nil && first == nil {
				first = fmt.Errorf("keeping snapshot %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return first
}

// manifestSpools are the spools run.json's lists are streamed from; nil
// for an empty list.
type manifestSpools struct {
	stops, events, diffs *spool
}

// close closes the views of the spools (spool.view).
func (sp manifestSpools) close() {
	sp.stops.closeView()
	sp.events.closeView()
	sp.diffs.closeView()
}

// writeManifest writes run.json atomically, with the stops, events and
// diffs streamed from their spools in between m's other fields. The bytes
// are those json.MarshalIndent would give for the whole manifest, without
// ever holding every stop.
func writeManifest(dir string, m *runjson.Manifest, sp manifestSpools) error {
	return writeFileAtomicFunc(filepath.Join(dir, manifestFile), func(w io.Writer) error {
		return encodeManifest(w, m, sp)
	})
}

// encodeManifest writes to w the manifest m, its stops, events and diffs
// streamed from sp (writeManifest).
func encodeManifest(w io.Writer, m *runjson.Manifest, sp manifestSpools) error {
	mm := *m
	mm.Stops, mm.Events, mm.Diffs = []runjson.Stop{}, []runjson.Event{}, []*snapshots.Diff{}
	if mm.Suspects == nil {
		mm.Suspects = []snapshots.Suspect{}
	}
	if mm.Stacks == nil {
		mm.Stacks = [][]snapshots.Frame{}
	}
	data, err := json.MarshalIndent(&mm, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding run.json: %w", err)
	}
	// The empty lists are the only top-level lines of this form: nested
	// keys are indented further and strings hold no raw newline.
	bw := bufio.NewWriterSize(w, 64<<10)
	rest := data
	for _, part := range []struct {
		key string
		sp  *spool
	}{{"stops", sp.stops}, {"events", sp.events}, {"diffs", sp.diffs}} {
		mark := []byte("\n  \"" + part.key + "\": [")
		i := bytes.Index(rest, append(mark, ']'))
		if i < 0 {
			return fmt.Errorf("encoding run.json: no %q list", part.key)
		}
		bw.Write(rest[:i+len(mark)])
		rest = rest[i+len(mark):]
		if err := streamList(bw, part.sp); err != nil {
			return fmt.Errorf("writing run.json %s: %w", part.key, err)
		}
	}
	bw.Write(rest)
	bw.WriteByte('\n')
	return bw.Flush()
}

// streamList writes a spool's records as the elements of a top-level list
// of run.json, indented as json.MarshalIndent indents them.
func streamList(w *bufio.Writer, sp *spool) error {
	var buf bytes.Buffer
	first := true
	err := sp.each(func(line []byte) error {
		buf.Reset()
		if err := json.Indent(&buf, line, "    ", "  "); err != nil {
			return err
		}
		if first {
			w.WriteString("\n    ")
			first = false
		} else {
			w.WriteString(",\n    ")
		}
		_, err := w.Write(buf.Bytes())
		return err
	})
	if err != nil {
		return err
	}
	if !first {
		w.WriteString("\n  ")
	}
	return nil
}

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
	size int64 // bytes written: the offset of the next record
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
	s.size += int64(len(data)) + 1
}

// mark is a place in a spool: the number of records before it and their
// bytes, where the next record starts.
type mark struct {
	n   int
	off int64
}

// end is the place after the last record written.
func (s *spool) end() mark {
	if s == nil {
		return mark{}
	}
	return mark{s.n, s.size}
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
	return s.eachFrom(mark{}, fn)
}

// eachFrom is each for the records from the place from on (spool.end
// gives places).
func (s *spool) eachFrom(from mark, fn func(line []byte) error) error {
	if s == nil {
		return nil
	}
	// A spool whose file could not be made holds no records but must not
	// pass for an empty one: run.json would silently lack them.
	if s.err != nil {
		return s.err
	}
	if s.n <= from.n {
		return nil
	}
	if s.w != nil {
		if err := s.w.Flush(); err != nil {
			return fmt.Errorf("writing spool file: %w", err)
		}
	}
	if _, err := s.f.Seek(from.off, io.SeekStart); err != nil {
		return fmt.Errorf("reading spool file: %w", err)
	}
	// Seek back to the end whatever happens, so that records added later
	// follow the others.
	defer s.f.Seek(0, io.SeekEnd)
	// Each line is read in place, in the reader's buffer, and only one
	// longer than the buffer is put together, in a buffer of its own kept
	// for the next: run.json is rewritten every ManifestEvery during a
	// run, through every record so far, and a new slice for every line
	// was garbage growing with the number of stops, which the garbage
	// collector, behind on a loaded machine, let into snapctl's peak
	// memory (docs/facts.md, fact 123).
	r := bufio.NewReaderSize(s.f, 64<<10)
	var long []byte
	for i := from.n; i < s.n; i++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long[:0], line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
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
	v := &spool{name: s.name, n: s.n, size: s.size, err: s.err}
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

// diskFull names a full file system as the cause of err, such as a
// snapshot that could not be read: valgrind writes snapshots without
// reporting a failed write, so a full TMPDIR (the private directory priv,
// where the measurements are made) or run directory (dir) shows as a
// truncated file. nil stays nil.
func diskFull(err error, priv, dir string) error {
	if err == nil {
		return nil
	}
	for _, d := range []struct{ path, name string }{{priv, filepath.Dir(priv)}, {dir, dir}} {
		var st syscall.Statfs_t
		if d.path != "" && syscall.Statfs(d.path, &st) == nil && st.Bavail*uint64(st.Bsize) < 1<<20 {
			// First: the message's first line is what run.json keeps.
			return fmt.Errorf("%w in %s: %w", syscall.ENOSPC, d.name, err)
		}
	}
	return err
}
