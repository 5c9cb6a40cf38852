package preflight

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ldd's lines as glibc prints them: by name, by a path given at link time
// (relative ones taken from the program's directory), the vDSO, the
// loader and a library not found.
func TestParseLdd(t *testing.T) {
	out := []byte("\tlinux-vdso.so.1 (0x00007ffd)\n" +
		"\t./libkeep.so (0x00007f5f)\n" +
		"\t/opt/app/lib/libplug.so (0x00007f60)\n" +
		"\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f5e)\n" +
		"\tlibgone.so => not found\n" +
		"\t/lib64/ld-linux-x86-64.so.2 (0x00007f61)\n")
	want := []string{"/srv/run/libkeep.so", "/opt/app/lib/libplug.so", "/lib/x86_64-linux-gnu/libc.so.6"}
	if diff := cmp.Diff(want, parseLdd(out, "/srv/run")); diff != "" {
		t.Errorf("parseLdd (-want +got):\n%s", diff)
	}
}
