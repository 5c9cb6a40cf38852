package proc_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/internal/proc"
	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMapsOfAProcess reads the mappings of a running C program as
// snapctl's readers use them: a file in a directory with spaces mapped at
// an offset and removed since (its path whole, Deleted, its offset and
// permissions), an anonymous page (no path), the C library at offset 0
// (where glibc's arenas and the trap handler find it) and the program's
// code.
func TestMapsOfAProcess(t *testing.T) {
	bin := testenv.Build(t, "testdata/maps.c")
	dir := filepath.Join(t.TempDir(), "my dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data file")
	if err := os.WriteFile(data, make([]byte, 2*os.Getpagesize()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, data)
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	var file, anon uint64
	line, _ := bufio.NewReader(out).ReadString('\n')
	if _, err := fmt.Sscanf(line, "%x %x", &file, &anon); err != nil {
		t.Fatalf("the program said %q: %v", line, err)
	}
	maps, err := proc.Maps(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	at := func(addr uint64) *proc.Mapping {
		for i := range maps {
			if maps[i].Lo <= addr && addr < maps[i].Hi {
				return &maps[i]
			}
		}
		t.Fatalf("no mapping holds %#x", addr)
		return nil
	}
	page := uint64(os.Getpagesize())
	want := proc.Mapping{Lo: file, Hi: file + page, Perms: "r-xp", Offset: page, Path: data, Deleted: true}
	if got := at(file); *got != want {
		t.Errorf("the removed file's mapping: %+v, want %+v", *got, want)
	}
	if got := at(anon); got.Path != "" || got.Deleted || !strings.HasPrefix(got.Perms, "rw") {
		t.Errorf("the anonymous page's mapping: %+v", *got)
	}
	var libc, code bool
	for _, m := range maps {
		if m.Offset == 0 && strings.HasPrefix(filepath.Base(m.Path), "libc.so") && strings.HasPrefix(m.Path, "/") {
			libc = true
		}
		if m.Path == bin && strings.Contains(m.Perms, "x") {
			code = true
		}
	}
	if !libc || !code {
		t.Errorf("libc at offset 0: %v, the program's code: %v, in %+v", libc, code, maps)
	}
}
