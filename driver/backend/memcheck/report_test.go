package memcheck_test

import (
	"testing"

	"github.com/snapctl/snapctl/driver/backend/memcheck"
	"github.com/snapctl/snapctl/snapshots"
)

// A suspect's line says each kind it has with its growth per hit, then
// what holds it: the root and the chain by site, or that the walk found
// no root.
func TestStandingLine(t *testing.T) {
	keep := snapshots.Frame{Function: "keep", File: "reach.c", Line: 20}
	put := snapshots.Frame{Function: "cache_put", File: "server.c", Line: 71}
	for _, tt := range []struct {
		st   snapshots.Standing
		want string
	}{
		{snapshots.Standing{DefinitelyLost: snapshots.StandingKind{Bytes: 2560, Blocks: 80, BytesPerHit: 640, BlocksPerHit: 20}},
			"keep (reach.c:20) at round: definitely lost 2.5 KiB in 80 blocks (+640 B, +20 blocks per hit)"},
		{snapshots.Standing{StillReachable: snapshots.StandingKind{Bytes: 48, Blocks: 1, BytesPerHit: 48, BlocksPerHit: 1},
			HeldBy: &snapshots.Holder{Root: &snapshots.HolderRoot{Kind: "global", Name: "cache", File: "server.c", Line: 42},
				Chain: []snapshots.HolderChain{{Site: put, Blocks: 3}, {Site: keep, Blocks: 1}}}},
			"keep (reach.c:20) at round: still reachable 48 B in 1 block (+48 B, +1 block per hit); held by `cache` (server.c:42) through 3 blocks of cache_put (server.c:71), then 1 block of keep (reach.c:20)"},
		{snapshots.Standing{StillReachable: snapshots.StandingKind{Bytes: 64, Blocks: 2, BytesPerHit: 32, BlocksPerHit: 0.5},
			HeldBy: &snapshots.Holder{Chain: []snapshots.HolderChain{{Site: keep, Blocks: 64}}}},
			"keep (reach.c:20) at round: still reachable 64 B in 2 blocks (+32 B, +0.5 blocks per hit); held, but no root found within the walk through 64 blocks of keep (reach.c:20)"},
		{snapshots.Standing{}, "keep (reach.c:20) at round: no live block in memcheck's loss records"},
	} {
		st := tt.st
		if st.HeldBy != nil {
			st.HeldBy.Sentence = st.HeldBy.Say()
		}
		if got := memcheck.Standing(snapshots.Suspect{Frame: keep, Breakpoint: "round", Memcheck: &st}); got != tt.want {
			t.Errorf("got  %s\nwant %s", got, tt.want)
		}
	}
}
