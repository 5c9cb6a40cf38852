package elfsym_test

import (
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/elfsym"
	"github.com/snapctl/snapctl/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestSymbols reads a program built here, then stripped: its own
// functions and variables from .symtab, malloc as an import in .dynsym,
// none from the stripped copy's .symtab, and the build ID readelf gives.
func TestSymbols(t *testing.T) {
	testenv.MustHave(t, "strip", "readelf")
	bin := testenv.Build(t, "../../driver/testdata/leak.c", "-Wl,--build-id")
	syms, err := elfsym.Open(bin, elfsym.Static|elfsym.Dynamic)
	if err != nil {
		t.Fatal(err)
	}
	defines, imports := map[string]bool{}, map[string]bool{}
	for _, s := range syms {
		if elfsym.Defines(s) {
			defines[s.Name] = true
		} else if elf.ST_TYPE(s.Info) == elf.STT_FUNC {
			imports[s.Name] = true
		}
	}
	if !defines["main"] || !defines["handle_request"] || defines["malloc"] || !imports["malloc"] {
		t.Errorf("defines main %v, handle_request %v, malloc %v; imports malloc %v",
			defines["main"], defines["handle_request"], defines["malloc"], imports["malloc"])
	}

	stripped := filepath.Join(t.TempDir(), "stripped")
	if out, err := exec.Command("strip", "-o", stripped, bin).CombinedOutput(); err != nil {
		t.Fatalf("strip: %v\n%s", err, out)
	}
	if _, err := elfsym.Open(stripped, elfsym.Static); !errors.Is(err, elf.ErrNoSymbols) {
		t.Errorf("a stripped program's .symtab: %v, want %v", err, elf.ErrNoSymbols)
	}
	dyn, err := elfsym.Open(stripped, elfsym.Static|elfsym.Dynamic)
	if err != nil || len(dyn) == 0 {
		t.Errorf("a stripped program's .dynsym: %d symbols, %v", len(dyn), err)
	}

	out, err := exec.Command("readelf", "-n", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("readelf -n gives no build ID:\n%s", out)
	}
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := elfsym.BuildID(f); got != string(m[1]) {
		t.Errorf("build ID %q, readelf says %q", got, m[1])
	}
	if _, err := elfsym.Open(filepath.Join(t.TempDir(), "none"), elfsym.Static); err == nil || !strings.Contains(err.Error(), "none") {
		t.Errorf("a missing file: %v", err)
	}
}

// TestValue gives a symbol's value as nm does, and names the file and
// the symbol when it has no such symbol.
func TestValue(t *testing.T) {
	testenv.MustHave(t, "nm")
	bin := testenv.Build(t, "../../driver/testdata/leak.c")
	out, err := exec.Command("nm", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^([0-9a-f]+) T handle_request$`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("nm gives no handle_request:\n%s", out)
	}
	want, _ := strconv.ParseUint(string(m[1]), 16, 64)
	if got, err := elfsym.Value(bin, elfsym.Static, "handle_request"); err != nil || got != want {
		t.Errorf("handle_request: %#x, %v; nm says %#x", got, err, want)
	}
	if _, err := elfsym.Value(bin, elfsym.Static, "no_such_symbol"); err == nil || !strings.Contains(err.Error(), "no_such_symbol") || !strings.Contains(err.Error(), bin) {
		t.Errorf("a missing symbol: %v", err)
	}
}
