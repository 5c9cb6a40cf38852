package native

import (
	"testing"

	"github.com/snapctl/snapctl/heaptrack"
)

// TestPreloadWrapper: gdb's exec-wrapper preloads heaptrack's library with
// its output, both quoted for the shell; a user's LD_PRELOAD comes after
// heaptrack's, the plan's (last) rather than snapctl's own.
func TestPreloadWrapper(t *testing.T) {
	tools, fifo := heaptrack.Tools{Preload: "/usr/lib/heaptrack/libheaptrack_preload.so"}, "/tmp/run dir/heaptrack.fifo"
	if got, want := wrapperOf(tools, fifo, nil), `env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so 'DUMP_HEAPTRACK_OUTPUT=/tmp/run dir/heaptrack.fifo'`; got != want {
		t.Errorf("wrapper\n got %s\nwant %s", got, want)
	}
	got := wrapperOf(tools, fifo, []string{"HOME=/root", "LD_PRELOAD=/opt/libjemalloc.so"})
	if want := `env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so:/opt/libjemalloc.so 'DUMP_HEAPTRACK_OUTPUT=/tmp/run dir/heaptrack.fifo'`; got != want {
		t.Errorf("wrapper with the user's LD_PRELOAD\n got %s\nwant %s", got, want)
	}
	got = wrapperOf(tools, fifo, []string{"LD_PRELOAD=/opt/libjemalloc.so", "LD_PRELOAD=/opt/libtcmalloc.so"})
	if want := `env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so:/opt/libtcmalloc.so 'DUMP_HEAPTRACK_OUTPUT=/tmp/run dir/heaptrack.fifo'`; got != want {
		t.Errorf("wrapper with LD_PRELOAD in snapctl's environment and the plan's\n got %s\nwant %s", got, want)
	}
	got = wrapperOf(tools, fifo, []string{"LD_PRELOAD=/opt/libjemalloc.so", "LD_PRELOAD="})
	if want := `env LD_PRELOAD=/usr/lib/heaptrack/libheaptrack_preload.so 'DUMP_HEAPTRACK_OUTPUT=/tmp/run dir/heaptrack.fifo'`; got != want {
		t.Errorf("wrapper with the plan's LD_PRELOAD empty\n got %s\nwant %s", got, want)
	}
}

// wrapperOf is preloadWrapper's wrapper.
func wrapperOf(tools heaptrack.Tools, fifo string, env []string) string {
	w, _ := preloadWrapper(tools, fifo, env)
	return w
}
