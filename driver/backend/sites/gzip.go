package sites

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"

	"github.com/snapctl/snapctl/internal/fsutil"
)

// keepSnapshot compresses the snapshot file raw (staged by Stage),
// open as f for reading and writing, with gzip into dst, and closes f;
// raw is then gone. read gets raw's bytes as they are compressed (the
// analysis parses them in the same pass) and may stop before the end: the
// rest is still kept. dst is written through when it exists and is not a
// regular file (see fsutil.WriteFile); on an error no partial file stays.
//
// The compressed bytes replace raw's in raw's own file, which then takes
// dst's name: creating a file costs the kernel more than truncating,
// rewriting and renaming one (on the ext4 of bench/stops.sh, 160 us
// against 60 us, with 1,500 stops a run), and valgrind has already
// created this one.
func keepSnapshot(f *os.File, raw, dst string, read func(io.Reader) error) error {
	defer f.Close()
	buf := getGzipBuffer()
	defer putGzipBuffer(buf)
	buf.Reset()
	zw := getGzipWriter()
	defer putGzipWriter(zw)
	zw.Reset(buf)
	tee := io.TeeReader(f, zw)
	if err := read(tee); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		if err := fsutil.WriteFile(dst, 0o644, func(w io.Writer) error { _, err := w.Write(buf.Bytes()); return err }); err != nil {
			return err
		}
		return os.Remove(raw)
	}
	err := f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(buf.Bytes(), 0)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(raw, dst)
	}
	if err != nil {
		os.Remove(raw)
	}
	return err
}

// writeKept writes a kept snapshot, compressed (data), to dst: a new
// file, or through what is there when it is not a regular file (see
// fsutil.WriteFile). On an error no partial file stays.
func writeKept(dst string, data []byte) error {
	if fi, err := os.Lstat(dst); err == nil && !fi.Mode().IsRegular() {
		return fsutil.WriteFile(dst, 0o644, func(w io.Writer) error { _, err := w.Write(data); return err })
	}
	f, err := openFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}

// gzipBuffer keeps the buffer keepSnapshot compresses into, a tenth of a
// snapshot's size, from one snapshot to the next. One, not a sync.Pool:
// a pool is emptied by the garbage collector, and a buffer and a writer
// made anew after a collection while the old ones wait for the next were
// snapctl's peak memory, higher the longer the run (bench/large.sh).
var gzipBuffer = make(chan *bytes.Buffer, 1)

func getGzipBuffer() *bytes.Buffer {
	select {
	case buf := <-gzipBuffer:
		return buf
	default:
		return new(bytes.Buffer)
	}
}

// putGzipBuffer keeps buf for the next snapshot unless one big snapshot
// made it big: the next stop's is most likely small again.
func putGzipBuffer(buf *bytes.Buffer) {
	if buf.Cap() > 4<<20 {
		return
	}
	select {
	case gzipBuffer <- buf:
	default:
	}
}

// gzipWriter keeps the writer of kept snapshots for reuse: it holds about
// a megabyte of compressor state, and allocating (and clearing) it anew
// for every snapshot was most of snapctl's own CPU per stop (perf on
// bench/threads: page faults under gzip.Writer.Write). One, kept for
// good, as gzipBuffer.
var gzipWriter = make(chan *gzip.Writer, 1)

func getGzipWriter() *gzip.Writer {
	select {
	case zw := <-gzipWriter:
		return zw
	default:
	}
	zw, err := gzip.NewWriterLevel(nil, snapshotLevel)
	if err != nil {
		panic(err) // snapshotLevel is a valid level
	}
	return zw
}

func putGzipWriter(zw *gzip.Writer) {
	select {
	case gzipWriter <- zw:
	default:
	}
}

// snapshotLevel is the gzip level of kept snapshots: a massif tree repeats
// its frame texts, and the fastest level already shrinks it about tenfold
// for a fraction of the CPU of the default (bench/large.sh).
const snapshotLevel = gzip.BestSpeed
