package snapshots

import "testing"

// A progression gives back every number added, in order, with their sum,
// and keeps a regular list in one run.
func TestProgression(t *testing.T) {
	for _, list := range [][]int{
		nil,
		{7},
		{1, 2, 3, 4, 5},
		{3, 3, 3, 1, 1, 2, 9, 16, 23, 30, -4, 0},
		{5, 1, 8, 2, 2, 2, 2, 100},
	} {
		var p progression
		sum := 0
		for _, v := range list {
			p.add(v)
			sum += v
		}
		if p.len() != len(list) || p.sum() != sum {
			t.Errorf("%v: len %d, sum %d; want %d, %d", list, p.len(), p.sum(), len(list), sum)
		}
		for i, v := range list {
			if got := p.at(i); got != v {
				t.Errorf("%v: at(%d) = %d, want %d", list, i, got, v)
			}
		}
	}
	var p progression
	for seq := 1; seq <= 100_000; seq += 3 {
		p.add(seq)
	}
	if len(p.runs) != 1 {
		t.Errorf("a regular list takes %d runs, want 1", len(p.runs))
	}
}
