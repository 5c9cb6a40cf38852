package heaptrack

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/snapshots"
)

// TestWriteXtmemoryReadsBack writes a replayed snapshot as an xtmemory
// file and reads it with snapctl's readers: the same tree, bytes and
// blocks.
func TestWriteXtmemoryReadsBack(t *testing.T) {
	t.Parallel()
	head, _, _ := strings.Cut(stream, "- 1\n")
	r, _ := replay(t, head)
	want := r.Snapshot(0)
	var b bytes.Buffer
	if err := WriteXtmemory(&b, want, "./prog"); err != nil {
		t.Fatal(err)
	}
	got, err := snapshots.ReadHeap(bytes.NewReader(b.Bytes()), "x.ms")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !got.Blocks || got.HeapBytes != want.HeapBytes {
		t.Errorf("blocks %v, heap %d, want %d", got.Blocks, got.HeapBytes, want.HeapBytes)
	}
	var same func(a, b *snapshots.Node, path string)
	same = func(a, b *snapshots.Node, path string) {
		if a.Bytes != b.Bytes || a.Blocks != b.Blocks || len(a.Children) != len(b.Children) {
			t.Errorf("%s: %d B %d blocks %d children, want %d B %d blocks %d children", path, a.Bytes, a.Blocks, len(a.Children), b.Bytes, b.Blocks, len(b.Children))
			return
		}
		for i := range a.Children {
			if a.Children[i].Frame != b.Children[i].Frame {
				t.Errorf("%s: child %d %+v, want %+v", path, i, a.Children[i].Frame, b.Children[i].Frame)
				continue
			}
			same(a.Children[i], b.Children[i], path+" < "+snapshots.FrameString(b.Children[i].Frame))
		}
	}
	same(got.Tree, want.Tree, "root")
	if _, err := snapshots.ReadHeapTree(bytes.NewReader(b.Bytes()), "x.ms", snapshots.NewFrameTable()); err != nil {
		t.Errorf("ReadHeapTree: %v", err)
	}
}

// TestHeapTreeAsFileReads cuts real recordings (four threads leaking from
// three sites; C++ new and new[], whose frames come from libstdc++; four
// threads keeping blocks of 0 bytes) and checks that the tree HeapTree
// makes of each snapshot is the one snapshots.ReadHeapTree reads from the
// file WriteXtmemory writes of it: every line, frame number, block count
// and total, and the frame table. A site of 0-byte blocks is in both, with
// its blocks: before, the file's tree of bytes left it out and its tree
// of blocks did not, which failed the file's read and the whole run.
func TestHeapTreeAsFileReads(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ src, bp string }{
		{"sites.c", "round_done"},
		{"newsites.cpp", "step"},
		{"empty.c", "round_done"},
	} {
		t.Run(c.src, func(t *testing.T) {
			snaps := runNative(t, compile(t, c.src), c.bp, "3")
			built, read := snapshots.NewFrameTable(), snapshots.NewFrameTable()
			for i, s := range snaps {
				var b bytes.Buffer
				if err := WriteXtmemory(&b, s, "./prog"); err != nil {
					t.Fatal(err)
				}
				want, err := snapshots.ReadHeapTree(&b, "x.ms", read)
				if err != nil {
					t.Fatal(err)
				}
				got, err := NewCut(s, "./prog").HeapTree(built)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, got, cmp.Exporter(func(reflect.Type) bool { return true })); diff != "" {
					t.Errorf("snapshot %d: the tree built differs from the file's (-file +built):\n%s", i, diff)
				}
				if got.HeapBytes == 0 || !got.Blocks {
					t.Errorf("snapshot %d: %d B, blocks %v: nothing was compared", i, got.HeapBytes, got.Blocks)
				}
				if c.src != "empty.c" || i == len(snaps)-1 {
					continue
				}
				var b2 bytes.Buffer
				if err := WriteXtmemory(&b2, s, "./prog"); err != nil {
					t.Fatal(err)
				}
				whole, err := snapshots.ReadHeap(&b2, "x.ms")
				if err != nil {
					t.Fatal(err)
				}
				sites := map[string][2]int64{}
				for _, n := range whole.Tree.Children {
					if strings.HasPrefix(n.Frame.Function, "keep_") { // not glibc's, for the threads
						sites[n.Frame.Function] = [2]int64{n.Bytes, n.Blocks}
					}
				}
				r := int64(i + 1)
				if want := map[string][2]int64{"keep_empty": {0, 4 * r}, "keep_some": {64 * r, 4 * r}}; !cmp.Equal(sites, want) {
					t.Errorf("stop %d: sites (bytes, blocks) %v, want %v", i, sites, want)
				}
			}
		})
	}
}
