package snapshots

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// deepMassif is a massif file with one detailed snapshot whose only stack
// is depth frames deep.
func deepMassif(depth int) string {
	var b strings.Builder
	b.WriteString("desc: x\ncmd: x\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=0\nmem_heap_B=100\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n")
	b.WriteString("n1: 100 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n")
	for i := range depth {
		kids := 1
		if i == depth-1 {
			kids = 0
		}
		fmt.Fprintf(&b, "%sn%d: 100 0x%x: f%d (a.c:%d)\n", strings.Repeat(" ", i+1), kids, 0x1000+i, i, i+1)
	}
	return b.String()
}

// show --format json writes a tree thousands of frames deep as valid JSON
// whose size grows with the number of frames, not with its square: the
// indentation stops growing at maxIndent.
func TestShowJSONDeep(t *testing.T) {
	t.Parallel()
	size := func(depth int) int {
		f, err := Parse(strings.NewReader(deepMassif(depth)), "deep.massif")
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := RenderShow(&buf, f, ShowOptions{Format: "json"}); err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(buf.Bytes(), &v); err != nil {
			t.Fatalf("depth %d: invalid JSON: %v", depth, err)
		}
		return buf.Len()
	}
	small, large := size(1000), size(4000)
	if per := (large - small) / 3000; per > 2000 {
		t.Errorf("each frame past depth 1000 costs %d bytes of output, want a constant under 2000 (indentation unbounded?)", per)
	}
}

// A byte count larger than any address space is a corrupt file, refused
// with its line, not summed into nonsense.
func TestHugeByteCounts(t *testing.T) {
	tree := "n1: 100 (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n n0: 100 0x1: f (a.c:1)\n"
	head := "desc: x\ncmd: x\ntime_unit: i\n#-----------\nsnapshot=0\n#-----------\ntime=0\n"
	for _, tt := range []struct{ file, want string }{
		{head + "mem_heap_B=900000000000000000\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n" + tree,
			"massif file x.massif:8: mem_heap_B=900000000000000000 is more than any 64-bit address space holds (72057594037927936 bytes)"},
		{head + "mem_heap_B=100\nmem_heap_extra_B=0\nmem_stacks_B=0\nheap_tree=detailed\n" + strings.Replace(tree, " 100 0x1", " 900000000000000000 0x1", 1),
			"massif file x.massif:13: byte count 900000000000000000 is more than any 64-bit address space holds (72057594037927936 bytes)"},
	} {
		_, err := Parse(strings.NewReader(tt.file), "x.massif")
		if err == nil || err.Error() != tt.want {
			t.Errorf("Parse = %v, want %q", err, tt.want)
		}
	}
}
