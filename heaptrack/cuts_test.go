package heaptrack

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// deepStream is an interpreted stream whose one allocation site is 8
// frames deep, then stops stops: each allocates a block of 16 B and cuts.
func deepStream(stops int) string {
	var b strings.Builder
	b.WriteString("v 10400 3\nX ./prog\ns 6 ./prog\ns 6 prog.c\n")
	for i := 1; i <= 8; i++ {
		name := fmt.Sprintf("fn%d", i)
		fmt.Fprintf(&b, "s %x %s\n", len(name), name)
	}
	// Function i is string i+2; instruction pointer i is in it, and
	// stack i is it called from stack i-1.
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "i %x 1 %x 2 %x\nt %x %x\n", 0x1000+16*i, i+2, 10+i, i, i-1)
	}
	b.WriteString("a 10 8\n")
	for k := 1; k <= stops; k++ {
		fmt.Fprintf(&b, "+ 0\n%s%d\n", cutPrefix, k)
	}
	return b.String()
}

// replayed replays text as a Recorder's replay goroutine does, with no
// cut asked for.
func replayed(t testing.TB, text string) *Recorder {
	r := &Recorder{cuts: make(map[int][]liveStack), cutReady: make(chan struct{}), repErr: make(chan error, 1), rep: NewReplayer()}
	r.replay(strings.NewReader(text))
	if err := <-r.repErr; err != nil {
		t.Fatal(err)
	}
	return r
}

// TestCutsHeldCompact checks what the recorder holds of each cut the
// stop loop has not asked for yet, which is as many as the stops the loop
// is behind the replay (hundreds under load): a few words per stack, made
// into a tree only when asked for, and not a tree of nodes and frames
// each (docs/facts.md, fact 130). Replaying 200 cuts more costs at most
// 3 allocations each (the cut's stacks, the channel that tells waiters,
// the map's growth), however deep the stacks.
func TestCutsHeldCompact(t *testing.T) {
	short, long := deepStream(100), deepStream(300)
	a := testing.AllocsPerRun(5, func() { replayed(t, short) })
	b := testing.AllocsPerRun(5, func() { replayed(t, long) })
	if per := (b - a) / 200; per > 3 {
		t.Errorf("each cut held costs %.1f allocations (%v for 100 stops, %v for 300), want at most 3", per, a, b)
	}

	// A cut asked for later is the heap at its mark: 16 B a stop, in 8
	// frames below the root.
	r := replayed(t, long)
	if n := len(r.cuts); n != 300 {
		t.Fatalf("%d cuts held, want 300", n)
	}
	for _, k := range []int{1, 150, 300} {
		snap, err := r.Snapshot(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		depth, n := 0, snap.Tree
		for ; len(n.Children) == 1; n = n.Children[0] {
			depth++
		}
		if snap.HeapBytes != int64(16*k) || snap.Tree.Blocks != int64(k) || depth != 8 || n.Frame.Function != "fn1" {
			t.Errorf("cut %d: %d B in %d blocks, %d frames down to %s; want %d B in %d blocks, 8 frames down to fn1",
				k, snap.HeapBytes, snap.Tree.Blocks, depth, n.Frame.Function, 16*k, k)
		}
	}
	// Asking for a cut drops the ones before it.
	if n := len(r.cuts); n != 0 {
		t.Errorf("%d cuts held after the last was asked for, want 0", n)
	}
}
