package snapshots

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// loadSnapshot reads the snapshot a spec (FILE#SEL) names, with FILE
// relative to testdata/analysis.
func loadSnapshot(t testing.TB, spec string) *Snapshot {
	t.Helper()
	path, sel := SplitSpec(spec)
	f, err := ParseFile(filepath.Join("..", "testdata", "analysis", path))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Select(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// buildTree builds a Node from lines in massif's layout, without the nK: prefix
// and with the indent giving the depth: "100 make_payload (leak.c:12)".
// A line "N below" is a below-threshold bucket.
func buildTree(t testing.TB, lines ...string) *Node {
	t.Helper()
	type open struct {
		n     *Node
		depth int
	}
	var stack []open
	var root *Node
	for _, l := range lines {
		depth := len(l) - len(strings.TrimLeft(l, " "))
		l = strings.TrimSpace(l)
		num, text, _ := strings.Cut(l, " ")
		b, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			t.Fatalf("bad tree line %q", l)
		}
		n := &Node{Bytes: b}
		if text == "below" {
			n.Below, n.Places = true, 1
		} else {
			n.Frame = ParseFrame(text)
		}
		for len(stack) > 0 && stack[len(stack)-1].depth >= depth {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			root = n
		} else {
			p := stack[len(stack)-1].n
			p.Children = append(p.Children, n)
		}
		stack = append(stack, open{n, depth})
	}
	return root
}

func buildSnap(t testing.TB, lines ...string) *Snapshot {
	t.Helper()
	tr := buildTree(t, lines...)
	return &Snapshot{HeapBytes: tr.Bytes, Kind: TreeDetailed, Tree: tr}
}

// siteBytes maps "function (file:line)" to bytes.
func siteBytes(sites []Site) map[string]int64 {
	m := make(map[string]int64)
	for _, s := range sites {
		m[FrameString(s.Frame)] = s.Bytes
	}
	return m
}

const heapRoot = "(heap allocation functions) malloc/new/new[], --alloc-fns, etc."

func TestSitesSkipLibraryFrames(t *testing.T) {
	tr := buildTree(t,
		"323 "+heapRoot,
		" 200 std::__new_allocator<Job>::allocate(unsigned long, void const*) (new_allocator.h:137)",
		"  150 void std::vector<Job, std::allocator<Job> >::_M_realloc_insert<Job const&>(Job const&) (vector.tcc:440)",
		"   150 Pool::add(Job const&) (pool.cpp:12)",
		"    100 main (pool.cpp:30)",
		"    50 worker (pool.cpp:40)",
		"  50 Pool::reserve(int) (pool.cpp:20)",
		" 60 0x4A: ??? (in /usr/lib/x86_64-linux-gnu/libfoo.so.1)",
		"  60 load_plugin (plugin.c:9)",
		" 40 strdup (strdup.c:42)",
		"  40 0x1: ???",
		// glibc's internal alias, as heaptrack's stacks name strdup.
		" 23 __GI___strdup (strdup.c:42)",
		"  23 cache_put (server.c:73)",
	)
	sites := Sites(tr, Options{})
	want := map[string]int64{
		"Pool::add(Job const&) (pool.cpp:12)": 150,
		"Pool::reserve(int) (pool.cpp:20)":    50,
		"load_plugin (plugin.c:9)":            60,
		"cache_put (server.c:73)":             23,
		// Library code all the way: the allocator's caller is the site.
		"strdup (strdup.c:42)": 40,
	}
	if diff := cmp.Diff(want, siteBytes(sites)); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
	add := sites[0]
	wantLib := []string{
		"std::__new_allocator<Job>::allocate(unsigned long, void const*) (new_allocator.h:137)",
		"void std::vector<Job, std::allocator<Job> >::_M_realloc_insert<Job const&>(Job const&) (vector.tcc:440)",
	}
	var gotLib []string
	for _, f := range add.Library {
		gotLib = append(gotLib, FrameString(f))
	}
	if diff := cmp.Diff(wantLib, gotLib); diff != "" {
		t.Errorf("library frames of %s (-want +got):\n%s", FrameString(add.Frame), diff)
	}
	var gotStack []string
	for _, f := range add.Stack {
		gotStack = append(gotStack, FrameString(f))
	}
	if diff := cmp.Diff([]string{"Pool::add(Job const&) (pool.cpp:12)", "main (pool.cpp:30)"}, gotStack); diff != "" {
		t.Errorf("stack (heaviest caller) (-want +got):\n%s", diff)
	}

	// With only the user's patterns, every root child is a site.
	bare := siteBytes(Sites(tr, Options{NoDefaultLibrary: true, NoWrappers: true}))
	if got := bare["std::__new_allocator<Job>::allocate(unsigned long, void const*) (new_allocator.h:137)"]; got != 200 {
		t.Errorf("without default library patterns, allocate holds %d bytes, want 200", got)
	}
	// Marking Pool's methods as library moves the sites to their callers.
	more := siteBytes(Sites(tr, Options{Library: []string{"Pool::*"}}))
	if more["main (pool.cpp:30)"] != 100 || more["worker (pool.cpp:40)"] != 50 {
		t.Errorf("with Library Pool::*, sites are %v", more)
	}
}

func TestSitesKeyIgnoresAddress(t *testing.T) {
	// Inlined frames repeat an address; one line called twice has two
	// addresses. Neither makes two sites.
	tr := buildTree(t,
		"30 "+heapRoot,
		" 10 0x10: make (a.c:5)",
		"  10 0x20: main (a.c:9)",
		" 20 0x11: make (a.c:5)",
		"  20 0x21: main (a.c:10)",
		" 7 0x12: helper (in /opt/app/libapp.so)",
		"  7 0x13: main (a.c:11)",
	)
	// make (a.c:5) would be a wrapper (one line, two callers).
	got := siteBytes(Sites(tr, Options{NoWrappers: true}))
	want := map[string]int64{"make (a.c:5)": 30, "helper (in /opt/app/libapp.so)": 7}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
}

func TestFramePattern(t *testing.T) {
	tests := []struct {
		pattern string
		frame   Frame
		want    bool
	}{
		{"std::*", Frame{Function: "std::vector<int>::push_back(int const&)"}, true},
		{"std::*", Frame{Function: "void std::vector<int>::_M_realloc_insert<int>(int&&)"}, true},
		{"std::*", Frame{Function: "mystd::f()"}, false},
		{"operator new*", Frame{Function: "operator new(unsigned long)"}, true},
		{"fn:???", Frame{Function: "???"}, true},
		{"fn:???", Frame{Function: "foo"}, false},
		{"_dl_allocate_tls", Frame{Function: "_dl_allocate_tls", File: "dl-tls.c", Line: 486}, true},
		{"leak.c:17", Frame{Function: "f", File: "leak.c", Line: 17}, true},
		{"leak.c:17", Frame{Function: "f", File: "leak.c", Line: 18}, false},
		{"*.h", Frame{Function: "f", File: "vector.h", Line: 3}, true},
		{"file:main", Frame{Function: "main", File: "m.c", Line: 3}, false},
		{"/usr/include/*", Frame{Function: "f", File: "/usr/include/c++/12/bits/vector.tcc", Line: 3}, true},
		{"/usr/include/*", Frame{Function: "f", File: "vector.tcc", Line: 3}, false},
		{"/usr/lib/*", Frame{Function: "???", Object: "/usr/lib/x86_64-linux-gnu/libc.so.6"}, true},
		{"obj:/usr/lib/*", Frame{Function: "/usr/lib/weird"}, false},
		{"Scheduler::submit", Frame{Function: "Scheduler::submit(int)"}, true},
		{"*::submit", Frame{Function: "Scheduler::submit(int)"}, true},
	}
	for _, tt := range tests {
		if got := ParseFramePattern(tt.pattern).Match(tt.frame); got != tt.want {
			t.Errorf("%q matches %+v = %v, want %v", tt.pattern, tt.frame, got, tt.want)
		}
	}
}

func TestQualifiedName(t *testing.T) {
	tests := map[string]string{
		"main":                        "main",
		"Scheduler::submit(int)":      "Scheduler::submit",
		"operator new(unsigned long)": "operator new",
		"void std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>(int const&)": "std::vector<int, std::allocator<int> >::_M_realloc_insert<int const&>",
		"std::ostream& std::operator<< <std::char_traits<char> >(std::ostream&, char const*)":    "std::operator<< <std::char_traits<char> >",
		"(anonymous namespace)::load(int)":       "(anonymous namespace)::load",
		"main::{lambda()#1}::operator()() const": "main::{lambda()#1}::operator()",
		// The template arguments after operator[] are not a return type.
		"YAML::Node const YAML::Node::operator[]<char [8]>(char const (&) [8]) const": "YAML::Node::operator[]<char [8]>",
		"bool operator==<int>(Box<int> const&, Box<int> const&)":                      "operator==<int>",
		"operator delete[](void*)": "operator delete[]",
	}
	for in, want := range tests {
		if got := qualifiedName(in); got != want {
			t.Errorf("qualifiedName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The text report prints a C++ name whole, without its return type and
// with template arguments folded.
func TestShortNameOperatorTemplate(t *testing.T) {
	for in, want := range map[string]string{
		"YAML::Node const YAML::Node::operator[]<char [8]>(char const (&) [8]) const": "YAML::Node::operator[]<…>(char const (&) [8]) const",
		"boost::shared_ptr<int> boost::make_shared<int>()":                            "boost::make_shared<…>()",
	} {
		if got := shortName(in); got != want {
			t.Errorf("shortName(%q) = %q, want %q", in, got, want)
		}
	}
	if !newLibrary(&Options{}).is(Frame{Function: "boost::detail::sp_counted_impl_p<int>::sp_counted_impl_p(int*)", File: "sp_counted_impl.hpp", Line: 53}) {
		t.Error("boost:: frames are not library frames by default")
	}
}

func TestFoldTemplates(t *testing.T) {
	tests := map[string]string{
		"std::vector<int, std::allocator<int> >::push_back(int const&)": "std::vector<…>::push_back(int const&)",
		"operator<(A const&, A const&)":                                 "operator<(A const&, A const&)",
		"std::operator<< <char>(std::ostream&)":                         "std::operator<< <…>(std::ostream&)",
		"plain(int)":                                                    "plain(int)",
	}
	for in, want := range tests {
		if got := foldTemplates(in); got != want {
			t.Errorf("foldTemplates(%q) = %q, want %q", in, got, want)
		}
	}
}

// An allocation wrapper (one allocating line, called from two places) is
// passed through: its callers are the sites, with the wrapper listed among
// their library frames. A wrapper of a wrapper is found too; a function
// that allocates on two lines, or has one caller, stays the site.
func TestSitesWrappers(t *testing.T) {
	tr := buildTree(t,
		"1134 "+heapRoot,
		" 1060 0x1: mg_malloc (mg.c:5)",
		"  1000 0x2: read_request (srv.c:10)",
		"   1000 0x3: main (srv.c:40)",
		"  50 0x4: mg_strdup (mg.c:9)",
		"   30 0x5: add_header (srv.c:20)",
		"    30 0x6: main (srv.c:41)",
		"   20 0x7: set_name (srv.c:25)",
		"    20 0x8: main (srv.c:42)",
		"  10 0x9: session_new (srv.c:30)",
		"   10 0x13: handler (srv.c:70)",
		"    6 0xA: main (srv.c:43)",
		"    4 0xB: main (srv.c:44)",
		" 48 0xC: cache_put (srv.c:50)",
		"  48 0xD: main (srv.c:45)",
		" 26 0xE: two_lines (srv.c:60)",
		"  13 0xF: main (srv.c:46)",
		"  13 0x10: main (srv.c:47)",
		" 0 0x11: two_lines (srv.c:61)",
		"  0 0x12: main (srv.c:48)",
	)
	sites := Sites(tr, Options{})
	want := map[string]int64{
		"read_request (srv.c:10)": 1000,
		"add_header (srv.c:20)":   30,
		"set_name (srv.c:25)":     20,
		"session_new (srv.c:30)":  10,
		"cache_put (srv.c:50)":    48,
		"two_lines (srv.c:60)":    26,
	}
	if diff := cmp.Diff(want, siteBytes(sites)); diff != "" {
		t.Errorf("sites (-want +got):\n%s", diff)
	}
	for _, s := range sites {
		if s.Frame.Function != "add_header" {
			continue
		}
		var lib []string
		for _, f := range s.Library {
			lib = append(lib, FrameString(f))
		}
		if diff := cmp.Diff([]string{"mg_malloc (mg.c:5)", "mg_strdup (mg.c:9)"}, lib); diff != "" {
			t.Errorf("library frames of add_header (-want +got):\n%s", diff)
		}
	}
	// session_new's row adds up two stacks (handler called from main:43
	// and main:44).
	d, err := DiffSnapshots(&Snapshot{Kind: TreeDetailed, Tree: buildTree(t, "0 "+heapRoot)}, &Snapshot{Kind: TreeDetailed, Tree: tr}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stacks := map[string]int{}
	for _, s := range d.Sites {
		stacks[FrameString(s.Frame)] = s.Stacks
	}
	if stacks["session_new (srv.c:30)"] != 2 || stacks["read_request (srv.c:10)"] != 0 {
		t.Errorf("stacks per row %v, want 2 for session_new and 0 (one) for read_request", stacks)
	}
	// Off, the wrapper is the site.
	if got := siteBytes(Sites(tr, Options{NoWrappers: true}))["mg_malloc (mg.c:5)"]; got != 1060 {
		t.Errorf("without wrappers, mg_malloc holds %d bytes, want 1060", got)
	}
}

// Options.AllocFns makes a named function a wrapper, by its name as
// massif prints it or by its qualified name, with wrapper detection on or
// off: cache_put's single caller and Pool::get's are the sites.
func TestSitesAllocFns(t *testing.T) {
	tr := buildTree(t,
		"112 "+heapRoot,
		" 48 0x1: cache_put (srv.c:50)",
		"  48 0x2: main (srv.c:45)",
		" 64 0x3: Pool::get(unsigned long) (pool.cpp:7)",
		"  64 0x4: Server::accept() (srv.cpp:12)",
		"   64 0x5: main (srv.cpp:40)",
	)
	want := map[string]int64{"main (srv.c:45)": 48, "Server::accept() (srv.cpp:12)": 64}
	for _, names := range [][]string{
		{"cache_put", "Pool::get"},
		{"cache_put", "Pool::get(unsigned long)"},
	} {
		for _, off := range []bool{false, true} {
			sites := Sites(tr, Options{AllocFns: names, NoWrappers: off})
			if diff := cmp.Diff(want, siteBytes(sites)); diff != "" {
				t.Errorf("AllocFns %q, NoWrappers %v: sites (-want +got):\n%s", names, off, diff)
			}
		}
	}
	unnamed := map[string]int64{"cache_put (srv.c:50)": 48, "Pool::get(unsigned long) (pool.cpp:7)": 64}
	if diff := cmp.Diff(unnamed, siteBytes(Sites(tr, Options{AllocFns: []string{"Pool::get(int)", "cache"}}))); diff != "" {
		t.Errorf("names that match neither: sites (-want +got):\n%s", diff)
	}
}
