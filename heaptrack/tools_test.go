package heaptrack

import (
	"runtime"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

func TestInjectCommandsQuotePaths(t *testing.T) {
	got := Tools{Inject: "/usr/lib/heaptrack/libheaptrack_inject.so"}.InjectCommands(`/tmp/a "b"\c` + "\n")
	first := `call (void) dlmopen(0, "/usr/lib/heaptrack/libheaptrack_inject.so", 2)`
	last := `call (void) heaptrack_inject("/tmp/a \"b\"\\c\012")`
	if len(got) < 2 || got[0] != first || got[len(got)-1] != last {
		t.Errorf("got %q, want %q first and %q last", got, first, last)
	}
}

// TestInjectCommandsSetUnwindUp: where the inject library calls
// libunwind's unw_set_cache_size (Debian's heaptrack), the commands set
// libunwind's cache up between dlmopen and heaptrack_inject
// (docs/facts.md, fact 151); a library that does not call it gets no
// such command, which would name symbols its process may not have.
func TestInjectCommandsSetUnwindUp(t *testing.T) {
	testenv.MustHave(t, "heaptrack")
	if runtime.GOARCH != "amd64" {
		t.Skipf("libunwind's names are checked on x86-64; this is %s", runtime.GOARCH)
	}
	tools, err := FindTools("")
	if err != nil {
		t.Fatal(err)
	}
	got := tools.InjectCommands("/tmp/out")
	if len(got) != 5 || !strings.Contains(got[1], "_ULx86_64_set_caching_policy)(*(void **) &_ULx86_64_local_addr_space, 2)") ||
		!strings.Contains(got[2], "_ULx86_64_set_cache_size)(*(void **) &_ULx86_64_local_addr_space, 1024, 0)") || got[3] != got[2] {
		t.Errorf("with %s: %q, want dlmopen, libunwind's policy and twice its cache size, heaptrack_inject", tools.Inject, got)
	}
	// heaptrack_interpret unwinds nothing of a process's.
	other := Tools{Inject: tools.Interpret}.InjectCommands("/tmp/out")
	if len(other) != 2 {
		t.Errorf("with %s: %q, want dlmopen and heaptrack_inject alone", tools.Interpret, other)
	}
}
