package snapshots

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A stack gets one ID however often it comes, whatever the addresses of
// its frames; stacks that differ in any printed field get their own.
func TestStackTable(t *testing.T) {
	tb := NewStackTable()
	a := []Frame{{Function: "keep", File: "leak.c", Line: 12, Addr: "0x1"}, {Function: "main", File: "leak.c", Line: 30}}
	sameA := []Frame{{Function: "keep", File: "leak.c", Line: 12, Addr: "0x2"}, {Function: "main", File: "leak.c", Line: 30}}
	for _, tc := range []struct {
		stack []Frame
		want  int
	}{
		{a, 0},
		{sameA, 0},
		{a[:1], 1},
		{[]Frame{{Function: "keep", File: "leak.c", Line: 13}, a[1]}, 2},
		{[]Frame{{Function: "keep", Object: "/lib/x.so"}}, 3},
		{[]Frame{{Function: "keep", File: "/lib/x.so"}}, 4},
		{nil, 5},
		{a, 0},
	} {
		if got := tb.ID(tc.stack); got != tc.want {
			t.Errorf("ID(%v) = %d, want %d", tc.stack, got, tc.want)
		}
	}
	if tb.Len() != 6 {
		t.Errorf("Len = %d, want 6", tb.Len())
	}
	want := []Frame{{Function: "keep", File: "leak.c", Line: 12}, {Function: "main", File: "leak.c", Line: 30}}
	if diff := cmp.Diff(want, tb.Stacks()[0]); diff != "" {
		t.Errorf("stack 0 (-want +got):\n%s", diff)
	}

	sites := []SiteDelta{{Frame: a[0], Stack: a, Delta: 8}}
	interned := tb.InternSites(sites)
	if sites[0].Stack == nil || sites[0].StackID != nil {
		t.Errorf("InternSites changed its argument: %+v", sites[0])
	}
	if interned[0].Stack != nil || interned[0].StackID == nil || *interned[0].StackID != 0 || interned[0].Delta != 8 {
		t.Errorf("interned site %+v, want stack_id 0 and no stack", interned[0])
	}
	got, err := ResolveStack(tb.Stacks(), interned[0].StackID, nil)
	if err != nil || len(got) != 2 {
		t.Errorf("ResolveStack = %v, %v", got, err)
	}
	if _, err := ResolveStack(tb.Stacks(), new(-1), nil); err == nil {
		t.Error("ResolveStack accepted stack_id -1")
	}
	if got, _ := ResolveStack(nil, nil, a); len(got) != 2 {
		t.Error("ResolveStack without an id did not return the inline stack")
	}
}
