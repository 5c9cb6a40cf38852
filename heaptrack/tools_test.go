package heaptrack

import "testing"

func TestInjectCommandsQuotePaths(t *testing.T) {
	got := Tools{Inject: "/usr/lib/heaptrack/libheaptrack_inject.so"}.InjectCommands(`/tmp/a "b"\c` + "\n")
	want := []string{
		`call (void) dlmopen(0, "/usr/lib/heaptrack/libheaptrack_inject.so", 2)`,
		`call (void) heaptrack_inject("/tmp/a \"b\"\\c\012")`,
	}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %q, want %q", got, want)
	}
}
