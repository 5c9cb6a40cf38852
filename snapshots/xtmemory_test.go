package snapshots

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// blockRow is one node of a tree with blocks: depth, bytes, blocks, frame.
type blockRow struct {
	Depth         int
	Bytes, Blocks int64
	Frame         string
}

func blockRows(n *Node, depth int, out []blockRow) []blockRow {
	out = append(out, blockRow{depth, n.Bytes, n.Blocks, FrameString(n.Frame)})
	for _, c := range n.Children {
		out = blockRows(c, depth+1, out)
	}
	return out
}

// ReadHeap merges an xtmemory file's curBk counts into its curB tree
// (recorded with record.sh: 10 payloads of 100 bytes and one 16-byte
// block).
func TestReadHeapXTMemory(t *testing.T) {
	f, err := os.Open("../testdata/massif/leak.monitor.ms")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadHeap(f, "leak.monitor.ms")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Blocks || s.Event != "curB" || s.HeapBytes != 1016 {
		t.Fatalf("snapshot blocks=%v event=%q heap=%d, want curB with blocks, 1016 B", s.Blocks, s.Event, s.HeapBytes)
	}
	want := []blockRow{
		{0, 1016, 11, "curB : currently allocated Bytes"},
		{1, 1000, 10, "make_payload (leak.c:12)"},
		{2, 1000, 10, "handle_request (leak.c:19)"},
		{3, 1000, 10, "main (leak.c:27)"},
		{1, 16, 1, "main (leak.c:24)"},
	}
	if diff := cmp.Diff(want, blockRows(s.Tree, 0, nil)); diff != "" {
		t.Errorf("tree (-want +got):\n%s", diff)
	}
	sites := Sites(s.Tree, Options{})
	if len(sites) != 2 || sites[0].Bytes != 1000 {
		t.Fatalf("sites %+v", sites)
	}
}

// A detailed snapshot file has no block counts; ReadHeap returns its
// snapshot as the parser does.
func TestReadHeapDetailed(t *testing.T) {
	f, err := os.Open("../testdata/massif/leak.detailed.massif")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ReadHeap(f, "leak.detailed.massif")
	if err != nil {
		t.Fatal(err)
	}
	if s.Blocks || s.Tree == nil || s.Event != "" {
		t.Errorf("snapshot blocks=%v event=%q tree=%v, want a detailed tree without blocks", s.Blocks, s.Event, s.Tree != nil)
	}
}

// Diffs of two xtmemory snapshots carry the blocks per site.
func TestDiffBlocks(t *testing.T) {
	a := xtSnap(t, "24", "1")
	b := xtSnap(t, "72", "3")
	d, err := DiffSnapshots(a, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Sites) != 1 || d.Sites[0].SiteBlocks == nil {
		t.Fatalf("sites %+v, want one with blocks", d.Sites)
	}
	got := *d.Sites[0].SiteBlocks
	if want := (SiteBlocks{BeforeBlocks: 1, AfterBlocks: 3, DeltaBlocks: 2}); got != want {
		t.Errorf("blocks %+v, want %+v", got, want)
	}
}

// xtSnap builds an xtmemory file of one site, f (s.c:1) called from main,
// holding bytes in blocks, and reads it with ReadHeap.
func xtSnap(t *testing.T, bytes, blocks string) *Snapshot {
	t.Helper()
	s, err := ReadHeap(strings.NewReader(xtFile(bytes, blocks, "f (s.c:1)")), "x.ms")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func xtFile(bytes, blocks, blocksFrame string) string {
	event := func(n int, name, desc, v, frame string) string {
		return "#-----------\nsnapshot=" + string(rune('0'+n)) + "\n#-----------\ntime=5\nmem_heap_B=" + v +
			"\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\nn1: " + v + " " + name + " : " + desc +
			"\n n1: " + v + " 0x1: " + frame + "\n  n0: " + v + " 0x2: main (s.c:9)\n"
	}
	return "desc: xtree.produce_report\ncmd: ./s\ntime_unit: ms\n" +
		event(0, "curB", "currently allocated Bytes", bytes, "f (s.c:1)") +
		event(1, "curBk", "currently allocated Blocks", blocks, blocksFrame)
}

// A curBk tree with a frame the curB tree lacks is an error at the curBk
// snapshot's line; so is a file that ends before any tree.
func TestReadHeapErrors(t *testing.T) {
	for _, tt := range []struct {
		name, text, want string
	}{
		{"mismatch", xtFile("24", "1", "g (s.c:2)"), `massif file x.ms:16: curBk tree does not match the curB tree: g (s.c:2) under curB : currently allocated Bytes`},
		{"totals only", "desc: x\ncmd: ./s\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=5\nmem_heap_B=0\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=empty\n", `massif file x.ms:12: expected a detailed snapshot, got end of file`},
		{"truncated", xtFile("24", "1", "f (s.c:1)")[:200], `massif file x.ms:`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadHeap(strings.NewReader(tt.text), "x.ms")
			var fe *FormatError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("err = %v, want a FormatError starting %q", err, tt.want)
			}
		})
	}
}

// With blocks, the text and Markdown tables of a diff gain a blocks
// column.
func TestRenderDiffBlocks(t *testing.T) {
	d, err := DiffSnapshots(xtSnap(t, "24", "1"), xtSnap(t, "72", "3"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	var text, md strings.Builder
	if err := RenderDiffText(&text, d, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RenderDiffMarkdown(&md, d, RenderOptions{}); err != nil {
		t.Fatal(err)
	}
	wantText := "DELTA  BLOCKS  BEFORE  AFTER  CHANGE  SITE\n+48 B      +2    24 B   72 B  grown   f (s.c:1)\n"
	if !strings.Contains(text.String(), wantText) {
		t.Errorf("text:\n%s\nwant it to contain:\n%s", text.String(), wantText)
	}
	if !strings.Contains(md.String(), "| Δ | Δ blocks | Before | After | Change | Site |") || !strings.Contains(md.String(), "| +48 B | +2 | 24 B | 72 B | grown |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
