package heaptrack

import (
	"bytes"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/snapshots"
)

// TestWriteXtmemoryReadsBack writes a replayed snapshot as an xtmemory
// file and reads it with snapctl's readers: the same tree, bytes and
// blocks.
func TestWriteXtmemoryReadsBack(t *testing.T) {
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
