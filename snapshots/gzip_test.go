package snapshots

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// A gzipped massif file reads as the file it holds: show prints the plain
// file's golden output (the .gz files are recorded with record.sh, `gzip
// -n`, as snapctl run keeps its snapshots).
func TestShowGzipGolden(t *testing.T) {
	for _, plain := range []string{"leak.xt.ms", "leak.monitor.ms"} {
		t.Run(plain, func(t *testing.T) {
			gz := parseRecorded(t, plain+".gz")
			if gz.Name != filepath.Join(recorded, plain+".gz") {
				t.Errorf("Name = %q, want the .gz path", gz.Name)
			}
			gz.Name = plain
			want := parseRecorded(t, plain)
			want.Name = plain
			var got, ref bytes.Buffer
			if err := RenderShow(&got, gz, ShowOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := RenderShow(&ref, want, ShowOptions{}); err != nil {
				t.Fatal(err)
			}
			if got.String() != ref.String() {
				t.Errorf("the .gz file shows\n%s\nthe plain one\n%s", got.String(), ref.String())
			}
			if plain == "leak.xt.ms" {
				checkGolden(t, "show/leak.xt.ms.txt", got.Bytes())
			}
		})
	}
}

// ReadHeap, which reads every stop's snapshot, reads a kept .gz snapshot
// with its exact counts.
func TestReadHeapGzip(t *testing.T) {
	f, err := os.Open(filepath.Join(recorded, "leak.monitor.ms.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadHeap(f, "leak.monitor.ms.gz")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Blocks || s.HeapBytes != 1016 {
		t.Fatalf("blocks=%v heap=%d, want blocks and 1016 B", s.Blocks, s.HeapBytes)
	}
	if n := childNamed(t, s.Tree, "make_payload (leak.c:12)"); n.Bytes != 1000 || n.Blocks != 10 {
		t.Errorf("make_payload = %d B in %d blocks, want 1000 B in 10", n.Bytes, n.Blocks)
	}
}

// gzip is told by its magic bytes, not by the name: a compressed file
// without .gz reads, and so does a plain file named .gz, from any reader
// (standard input too).
func TestGzipByMagic(t *testing.T) {
	plain, err := os.ReadFile(filepath.Join(recorded, "leak.detailed.massif"))
	if err != nil {
		t.Fatal(err)
	}
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	zw.Write(plain)
	zw.Close()
	// Two members, as `cat a.gz b.gz` makes: read as one stream.
	var twice bytes.Buffer
	for range 2 {
		zw := gzip.NewWriter(&twice)
		zw.Write(plain)
		zw.Close()
	}
	for _, tc := range []struct {
		name  string
		data  []byte
		snaps int
	}{
		{"snap.massif", zipped.Bytes(), 1},
		{"plain.massif.gz", plain, 1},
		{"<stdin>", zipped.Bytes(), 1},
		{"twice.gz", twice.Bytes(), 2},
	} {
		f, err := Parse(iotestOneByte(tc.data), tc.name)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if len(f.Snapshots) != tc.snaps || f.Snapshots[0].HeapBytes != 1016 {
			t.Errorf("%s: %d snapshots, heap %d; want %d, 1016 B", tc.name, len(f.Snapshots), f.Snapshots[0].HeapBytes, tc.snaps)
		}
	}
}

// iotestOneByte reads one byte at a time, so the magic bytes arrive split.
func iotestOneByte(b []byte) io.Reader { return &oneByte{b} }

type oneByte struct{ b []byte }

func (r *oneByte) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.b[0]
	r.b = r.b[1:]
	return 1, nil
}

// A damaged .gz is a clear error naming the file, never a panic or a
// silently short file.
func TestGzipDamaged(t *testing.T) {
	gz, err := os.ReadFile(filepath.Join(recorded, "leak.monitor.ms.gz"))
	if err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(gz)
	corrupt[len(corrupt)-6] ^= 0xff // the CRC-32
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"truncated.gz", gz[:len(gz)/2], "reading massif file truncated.gz: unexpected EOF"},
		{"header.gz", []byte{0x1f, 0x8b, 0, 0, 0}, "reading massif file header.gz: unexpected EOF"},
		{"method.gz", []byte{0x1f, 0x8b, 9, 0, 0, 0, 0, 0, 0, 0, 0}, "reading massif file method.gz: gzip: invalid header"},
		{"crc.gz", corrupt, "reading massif file crc.gz: gzip: invalid checksum"},
	} {
		_, err := Parse(bytes.NewReader(tc.data), tc.name)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
