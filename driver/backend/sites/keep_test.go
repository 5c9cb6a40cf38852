package sites

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// keepSnapshot turns the staged file into the kept one: the same inode,
// gzipped, under the stop's name, the staged name gone, what read saw the
// whole file. A kept name that is a symbolic link is written through, as
// fsutil.WriteFile does, and the staged file then goes.
func TestKeepSnapshotRewritesTheStagedFile(t *testing.T) {
	dir := t.TempDir()
	const text = "desc: --xtree-memory=full\ncmd: ./leak 3\n"
	for _, link := range []bool{false, true} {
		t.Run(fmt.Sprintf("link=%v", link), func(t *testing.T) {
			raw := filepath.Join(dir, fmt.Sprintf(".%v.ms", link))
			dst := filepath.Join(dir, fmt.Sprintf("0001-request-1-%v.massif.gz", link))
			if err := os.WriteFile(raw, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			target := filepath.Join(dir, fmt.Sprintf("target-%v", link))
			if link {
				if err := os.WriteFile(target, nil, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, dst); err != nil {
					t.Fatal(err)
				}
			}
			before, err := os.Stat(raw)
			if err != nil {
				t.Fatal(err)
			}
			f, err := openFile(raw, os.O_RDWR)
			if err != nil {
				t.Fatal(err)
			}
			var seen []byte
			if err := keepSnapshot(f, raw, dst, func(r io.Reader) (err error) { seen, err = io.ReadAll(r); return err }); err != nil {
				t.Fatal(err)
			}
			if string(seen) != text {
				t.Errorf("read saw %q, want the file, %q", seen, text)
			}
			if _, err := os.Lstat(raw); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the staged file is still there: %v", err)
			}
			kept, err := os.Stat(dst)
			if err != nil {
				t.Fatal(err)
			}
			if !link && !os.SameFile(before, kept) {
				t.Errorf("the kept file is a new one, want the staged file renamed")
			}
			got, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			zr, err := gzip.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatalf("the kept file is not gzip: %v", err)
			}
			plain, err := io.ReadAll(zr)
			if err != nil || string(plain) != text {
				t.Errorf("the kept file holds %q (%v), want %q", plain, err, text)
			}
			if fi, err := os.Lstat(dst); link && (err != nil || fi.Mode()&os.ModeSymlink == 0) {
				t.Errorf("the link was replaced: %v, %v", fi, err)
			}
		})
	}
}

// A tree's sum leaves out its time= lines, wherever the writes cut the
// file, and nothing else.
func TestTreeHash(t *testing.T) {
	files := []string{
		"time=1\nsnapshot=0\n n1: 5 0x1: f (a.c:1)\n",
		"desc: x\ntime=12345\nmem_heap_B=5\ntime=9\nn0: 5 curB\n",
		"tim\ntime\ntimex=1\n time=2\nxtime=3\n\n\ntime=",
		"no newline at the end: time=5",
		"time=1",
		"",
	}
	// want hashes the file without its time= lines in one write.
	want := func(text string) treeSum {
		h := newTreeHash()
		var kept []string
		for _, l := range strings.SplitAfter(text, "\n") {
			if !strings.HasPrefix(l, "time=") {
				kept = append(kept, l)
			}
		}
		h.add([]byte(strings.Join(kept, "")))
		return h.sum()
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, text := range files {
		for range 200 {
			h := newTreeHash()
			rest := []byte(text)
			for len(rest) > 0 {
				k := 1 + rng.IntN(min(len(rest), 9))
				h.Write(rest[:k])
				rest = rest[k:]
			}
			if got := h.sum(); got != want(text) {
				t.Fatalf("%q cut at random: sum differs from the file's without time= lines", text)
			}
		}
	}
	// Another time= value sums the same; any other change does not.
	sum := func(s string) treeSum { h := newTreeHash(); h.Write([]byte(s)); return h.sum() }
	base := "time=1\nn1: 5 curB\n n0: 5 0x1: f (a.c:1)\n"
	if sum(base) != sum("time=987654\nn1: 5 curB\n n0: 5 0x1: f (a.c:1)\n") {
		t.Error("two files differing only in time= sum differently")
	}
	for _, other := range []string{"time=1\nn1: 6 curB\n n0: 5 0x1: f (a.c:1)\n", "time=1\nn1: 5 curB\n n0: 5 0x1: f (a.c:1)", "time=1\nn1: 5 curB\n n0: 5 0x1: f (a.c:1)\ntim\n"} {
		if sum(base) == sum(other) {
			t.Errorf("%q sums as %q", other, base)
		}
	}
}
