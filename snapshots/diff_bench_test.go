package snapshots

import (
	"fmt"
	"testing"
)

// syntheticTree builds a massif-like tree of about sites*(1+fanout*depth)
// lines: each site is reached through two libstdc++ frames, then has
// fanout caller chains of depth frames. grow adds bytes to every third
// site, as a leak between two hits would.
func syntheticTree(sites, fanout, depth int, grow int64) *Node {
	root := &Node{Frame: Frame{Function: heapRoot}}
	for s := 0; s < sites; s++ {
		site := &Node{Frame: Frame{Function: fmt.Sprintf("Module%d::handler%d(Request const&)", s%37, s), File: fmt.Sprintf("mod%d.cpp", s%37), Line: 10 + s}}
		for c := 0; c < fanout; c++ {
			b := int64(16 * (c + 1))
			if s%3 == 0 {
				b += grow
			}
			var chain *Node
			for d := depth - 1; d >= 0; d-- {
				n := &Node{Bytes: b, Frame: Frame{Function: fmt.Sprintf("caller%d_%d", c, d), File: "main.cpp", Line: 100 + d}}
				if chain != nil {
					n.Children = []*Node{chain}
				}
				chain = n
			}
			site.Children = append(site.Children, chain)
			site.Bytes += b
		}
		alloc := &Node{Bytes: site.Bytes, Frame: Frame{Function: "std::vector<Item, std::allocator<Item> >::_M_realloc_insert(Item&&)", File: "vector.tcc", Line: 440}, Children: []*Node{site}}
		top := &Node{Bytes: site.Bytes, Frame: Frame{Function: "std::__new_allocator<Item>::allocate(unsigned long, void const*)", File: "new_allocator.h", Line: 137}, Children: []*Node{alloc}}
		root.Children = append(root.Children, top)
		root.Bytes += site.Bytes
	}
	return root
}

func countNodes(n *Node) int {
	c := 1
	for _, ch := range n.Children {
		c += countNodes(ch)
	}
	return c
}

// BenchmarkDiff diffs two snapshots of ~100k tree lines each.
func BenchmarkDiff(b *testing.B) {
	ta, tb := syntheticTree(2000, 5, 10, 0), syntheticTree(2000, 5, 10, 24)
	a := &Snapshot{Kind: TreeDetailed, Tree: ta, HeapBytes: ta.Bytes}
	s := &Snapshot{Kind: TreeDetailed, Tree: tb, HeapBytes: tb.Bytes}
	b.ReportMetric(float64(countNodes(ta)), "lines/tree")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, err := DiffSnapshots(a, s, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(d.Sites) != 667 {
			b.Fatalf("%d sites changed, want 667", len(d.Sites))
		}
	}
}

// BenchmarkSeriesAdd is the per-hit cost the driver pays: one snapshot
// summarised and diffed against the previous one's summary.
func BenchmarkSeriesAdd(b *testing.B) {
	trees := []*Node{syntheticTree(2000, 5, 10, 0), syntheticTree(2000, 5, 10, 24)}
	s := NewSeries("bp", Options{})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t := trees[i%2]
		if _, err := s.Add(i+1, i+1, &Snapshot{Kind: TreeDetailed, Tree: t, HeapBytes: t.Bytes}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDiffTree merges the same two trees into a delta tree.
func BenchmarkDiffTree(b *testing.B) {
	ta, tb := syntheticTree(2000, 5, 10, 0), syntheticTree(2000, 5, 10, 24)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if DiffTree(ta, tb) == nil {
			b.Fatal("nil delta tree")
		}
	}
}
