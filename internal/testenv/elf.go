package testenv

import (
	"debug/elf"
	"testing"

	"github.com/snapctl/snapctl/internal/elfsym"
)

// Symbols are the symbols of the ELF file bin's symbol table (.symtab),
// by name; the test fails when it cannot read them.
func Symbols(t testing.TB, bin string) map[string]elf.Symbol {
	t.Helper()
	syms, err := elfsym.Open(bin, elfsym.Static)
	if err != nil {
		t.Fatal(err)
	}
	byName := make(map[string]elf.Symbol, len(syms))
	for _, s := range syms {
		byName[s.Name] = s
	}
	return byName
}

// BuildID is the GNU build ID of the ELF file at path, in hex; the test
// fails when it cannot read the file or the file has none (every program
// gcc builds here and every library Debian ships has one).
func BuildID(t testing.TB, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id := elfsym.BuildID(f)
	if id == "" {
		t.Fatalf("%s has no GNU build ID", path)
	}
	return id
}
