package preflight

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/snapctl/snapctl/internal/testenv"
)

// A stripped binary that exports functions (-rdynamic, or an interpreter
// such as python3) is not limited to *addresses; one whose debug info and
// symbol table went to a separate file that is not installed gets one
// warning that says both, never two that contradict each other.
func TestInspectBinaryStripped(t *testing.T) {
	testenv.MustHave(t, "objcopy")
	noLines := "gdb cannot resolve file:line breakpoints in it and reports show no source lines for its frames; breakpoints on the functions of the libraries it links (libc's getpid, malloc) are not affected"
	exported := "gdb can break on the functions it exports and on *addresses in it, not on its other functions (the functions of the libraries it links still work), and reports name those frames ??? under massif, by module and offset with --sites (prog+0x1a2b3)"
	rdynamic := buildProgram(t, "-g0", "-s", "-rdynamic")
	want := []Finding{
		{Check: "debug info", Subject: rdynamic, Summary: "has no debug info", Explain: []string{noLines, "rebuild it with -g (and -O0 for exact lines)"}},
		{Check: "symbols", Subject: rdynamic, Summary: "is stripped (no symbol table)", Explain: []string{exported, "build it without stripping"}},
	}
	info, err := InspectBinary(rdynamic)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, info.Warnings); diff != "" {
		t.Errorf("-rdynamic, stripped: warnings (-want +got):\n%s", diff)
	}

	// As distributions ship programs: debug info and symbols in a file
	// named by .gnu_debuglink, here not installed.
	for _, tt := range []struct {
		name     string
		flags    []string
		breaksOn string
	}{
		{"exports", []string{"-rdynamic"}, exported},
		{"exports nothing", nil, "gdb can break on *addresses in it but not on its own functions (the functions of the libraries it links still work), and reports name its frames ??? under massif, by module and offset with --sites (prog+0x1a2b3)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			bin := filepath.Join(dir, "prog")
			data, err := os.ReadFile(buildProgram(t, tt.flags...))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(bin, data, 0o755); err != nil {
				t.Fatal(err)
			}
			debug := filepath.Join(dir, "prog.debug")
			for _, args := range [][]string{
				{"--only-keep-debug", bin, debug},
				{"--strip-all", "--add-gnu-debuglink=" + debug, bin},
			} {
				if out, err := exec.Command("objcopy", args...).CombinedOutput(); err != nil {
					t.Fatalf("objcopy %q: %v\n%s", args, err, out)
				}
			}
			if err := os.Remove(debug); err != nil {
				t.Fatal(err)
			}
			info, err := InspectBinary(bin)
			if err != nil {
				t.Fatal(err)
			}
			want := []Finding{{Check: "debug info", Subject: bin, Summary: "keeps its debug info and symbol table in a separate file (prog.debug) that is not installed",
				Explain: []string{noLines, tt.breaksOn, "install the matching -dbgsym/-dbg package or rebuild with -g"}}}
			if diff := cmp.Diff(want, info.Warnings); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
		})
	}
}
