package heaptrack

import (
	"testing"

	"github.com/snapctl/snapctl/snapshots"
)

// TestSuspectsFromCuts feeds the cuts of a native run to the series that
// massif's snapshots go through (snapshots.Series): the three leaking
// sites of sites.c are steady suspects with their exact growth and blocks
// per hit.
func TestSuspectsFromCuts(t *testing.T) {
	const rounds = 5
	snaps := runSites(t, rounds)
	s := snapshots.NewSeries("round", snapshots.Options{})
	for i, snap := range snaps[:rounds] {
		if _, err := s.Add(i+1, i+1, snap); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string][2]float64{ // growth and blocks per hit
		"keep_small":  {102, 4},
		"keep_table":  {4000, 4},
		"grow_buffer": {256, 0},
	}
	got := 0
	for _, sus := range s.Suspects() {
		w, ok := want[sus.Frame.Function]
		if !ok {
			t.Errorf("unexpected suspect %s", snapshots.FrameString(sus.Frame))
			continue
		}
		got++
		if sus.Pattern != snapshots.PatternSteady || float64(sus.GrowthPerHit) != w[0] || sus.BlocksPerHit == nil || *sus.BlocksPerHit != w[1] {
			t.Errorf("%s: %s, %d B per hit, blocks %v; want steady, %v B and %v blocks per hit",
				sus.Frame.Function, sus.Pattern, sus.GrowthPerHit, sus.BlocksPerHit, w[0], w[1])
		}
	}
	if got != len(want) {
		t.Errorf("%d of %d suspects", got, len(want))
	}
}
