package heaptrack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapctl/snapctl/snapshots"
)

// stream is an interpreted stream as heaptrack_interpret 1.4 writes it:
// two stacks below main, one of them through an inlined function and
// operator new, a block allocated twice and freed once, and a cut.
const stream = `v 10400 3
X ./prog
s 6 ./prog
s 4 main
s 6 prog.c
s 4 leaf
s 6 helper
s 1b operator new(unsigned long)
s 13 /lib/libstdc++.so.6
i 1000 1 2 3 10
t 1 0
i 1010 1 4 3 5 5 3 14
t 2 1
a 18 2
+ 0
+ 0
- 0
i 2000 7
t 3 1
a 28 3
+ 1
c 2710
# snapctl-cut 4
#....
- 1
`

func replay(t *testing.T, text string) (*Replayer, []int) {
	t.Helper()
	r := NewReplayer()
	var cuts []int
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		k, isCut, err := r.Line([]byte(l))
		if err != nil {
			t.Fatal(err)
		}
		if isCut {
			cuts = append(cuts, k)
		}
	}
	return r, cuts
}

// TestReplaySnapshot checks the tree a replay gives: sites largest first,
// inlined frames innermost first at one address, operator new dropped,
// bytes as requested and live blocks.
func TestReplaySnapshot(t *testing.T) {
	head, _, _ := strings.Cut(stream, "- 1\n")
	r, cuts := replay(t, head)
	if len(cuts) != 1 || cuts[0] != 4 {
		t.Fatalf("cuts %v, want [4]", cuts)
	}
	s := r.Snapshot(4)
	var b strings.Builder
	var walk func(n *snapshots.Node, depth int)
	walk = func(n *snapshots.Node, depth int) {
		b.WriteString(strings.Repeat(" ", depth) + n.Frame.Addr + " " + snapshots.FrameString(n.Frame) + " " +
			itoa(int(n.Bytes)) + "/" + itoa(int(n.Blocks)) + "\n")
		for _, c := range n.Children {
			walk(c, depth+1)
		}
	}
	walk(s.Tree, 0)
	want := ` ` + RootName + ` 64/2
 0x2000 ??? (in /lib/libstdc++.so.6) 40/1
  0x1000 main (prog.c:16) 40/1
 0x1010 leaf (prog.c:5) 24/1
  0x1010 helper (prog.c:20) 24/1
   0x1000 main (prog.c:16) 24/1
`
	if b.String() != want {
		t.Errorf("tree:\n%s\nwant:\n%s", b.String(), want)
	}
	if s.HeapBytes != 64 || !s.Blocks || s.Index != 4 || r.LiveBytes != 64 || r.LiveBlocks != 2 || r.Events != 4 {
		t.Errorf("heap %d, blocks %v, index %d, live %d in %d, events %d", s.HeapBytes, s.Blocks, s.Index, r.LiveBytes, r.LiveBlocks, r.Events)
	}
}

// TestReplayDropsOperatorNew: a stack whose innermost frame is operator
// new starts at its caller, as valgrind's do.
func TestReplayDropsOperatorNew(t *testing.T) {
	head, _, _ := strings.Cut(stream, "- 1\n")
	r, _ := replay(t, strings.Replace(head, "i 2000 7\n", "i 2000 7 6\n", 1))
	sites := r.Snapshot(0).Tree.Children
	if len(sites) != 2 || snapshots.FrameString(sites[0].Frame) != "main (prog.c:16)" || sites[0].Bytes != 40 {
		t.Errorf("sites %+v, want main (prog.c:16) with 40 bytes first", sites)
	}
}

// TestReplayErrors: a line that names what was never defined, or is not
// hex, is an error with its line number.
func TestReplayErrors(t *testing.T) {
	for _, c := range []struct{ lines, msg string }{
		{"+ 0", "unknown allocation"},
		{"a 10 5", "bad allocation"},
		{"t 3 0", "bad stack"},
		{"i 10 1 9", "unknown string"},
		{"i 10 1 0 0", "bad instruction pointer"},
		{"s 5 abc", "bad string"},
		{"a zz 0", "bad allocation"},
		{"# snapctl-cut x", "bad cut"},
	} {
		r := NewReplayer()
		r.Line([]byte("v 10400 3"))
		_, _, err := r.Line([]byte(c.lines))
		var se *StreamError
		if !errors.As(err, &se) || se.Msg != c.msg || se.Line != 2 {
			t.Errorf("%q: %v, want %q at line 2", c.lines, err, c.msg)
		}
	}
}

// TestFindToolsNamesThePackage: a missing part names the Debian package.
func TestFindToolsNamesThePackage(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "libheaptrack_preload.so"), nil, 0o644)
	_, err := FindTools(dir)
	var me *MissingError
	if !errors.As(err, &me) || me.Package != "heaptrack" || !strings.Contains(err.Error(), "libheaptrack_inject.so") {
		t.Errorf("FindTools: %v", err)
	}
}

// TestReadLayout reads both installed libraries' layouts (the same code:
// the lock and the state pointer in .bss) and refuses a library without
// heaptrack's code.
func TestReadLayout(t *testing.T) {
	tools, err := FindTools("")
	if err != nil {
		t.Skip(err)
	}
	for _, lib := range []string{tools.Preload, tools.Inject} {
		l, err := ReadLayout(lib)
		if err != nil {
			t.Fatal(err)
		}
		if l.Lock == 0 || l.Data == 0 || l.Lock == l.Data {
			t.Errorf("%s: %+v", lib, l)
		}
	}
	var le *LayoutError
	if _, err := ReadLayout("/lib/x86_64-linux-gnu/libc.so.6"); !errors.As(err, &le) {
		t.Errorf("libc: %v, want a LayoutError", err)
	}
}
