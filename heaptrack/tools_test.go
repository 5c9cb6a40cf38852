package heaptrack

import "testing"

func TestInjectCommandsQuotePaths(t *testing.T) {
	got := Tools{Inject: "/usr/lib/heaptrack/libheaptrack_inject.so"}.InjectCommands(`/tmp/a "b"\c` + "\n")
	first := `call (void) dlmopen(0, "/usr/lib/heaptrack/libheaptrack_inject.so", 2)`
	last := `call (void) heaptrack_inject("/tmp/a \"b\"\\c\012")`
	if len(got) < 2 || got[0] != first || got[len(got)-1] != last {
		t.Errorf("got %q, want %q first and %q last", got, first, last)
	}
}
