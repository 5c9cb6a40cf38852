package heaptrack

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestBreakpointInDlopenedLibrary stops at a function of a library the
// program loads with dlopen (a pending breakpoint) and unloads before its
// last stop: the library's site has its stack named from the library's
// debug information at every stop, and still at the end, after dlclose.
func TestBreakpointInDlopenedLibrary(t *testing.T) {
	t.Parallel()
	needTools(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libplugin.so")
	src, _ := filepath.Abs("testdata")
	for _, args := range [][]string{
		{"-g", "-O0", "-fPIC", "-shared", "-o", lib, filepath.Join(src, "plugin.c")},
		{"-g", "-O0", "-o", filepath.Join(dir, "dlhost"), filepath.Join(src, "dlhost.c")},
	} {
		if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
			t.Fatalf("gcc %v: %v\n%s", args, err, out)
		}
	}
	const rounds = 3
	snaps := runNative(t, filepath.Join(dir, "dlhost"), "-f plugin_tick", lib, itoa(rounds))
	if len(snaps) != rounds+1 {
		t.Fatalf("%d snapshots, want %d and the end", len(snaps), rounds+1)
	}
	for i, s := range snaps {
		k := int64(min(i+1, rounds))
		for _, c := range s.Tree.Children {
			if c.Frame.Function != "plugin_alloc" {
				continue
			}
			if c.Frame.File != "plugin.c" || c.Frame.Line != 7 || c.Bytes != 48*k || c.Blocks != k {
				t.Errorf("snapshot %d: %+v %d bytes in %d blocks, want plugin.c:7, %d in %d", i, c.Frame, c.Bytes, c.Blocks, 48*k, k)
			}
			k = -1
		}
		if k != -1 {
			t.Errorf("snapshot %d: no plugin_alloc site", i)
		}
	}
	if got := siteFigures(snaps[rounds])["host_alloc"]; got != [2]int64{64, 1} {
		t.Errorf("end: host_alloc %v, want 64 bytes in 1 block", got)
	}
}
