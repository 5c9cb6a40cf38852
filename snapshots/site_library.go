package snapshots

// DefaultLibrary lists the frame patterns that mark library code unless
// Options.NoDefaultLibrary is set. The site of an allocation is the first
// frame, walking from the allocator outwards, that none of them matches.
//
// Massif prints only a file's base name unless valgrind runs with
// --fullpath-after=, so the C++ standard library is recognised by its
// namespaces and the C library by its allocation wrappers; the path
// patterns apply to full paths and to the object of `fn (in /lib/x.so)`
// frames, which massif prints for code without debug information.
var DefaultLibrary = []string{
	// C++ runtime and standard library.
	"operator new*",
	"operator delete*",
	"std::*",
	"__gnu_cxx::*",
	"__cxxabiv1::*",
	"__cxa_*",
	// Boost, header-only for the most part: its containers and smart
	// pointers allocate for the caller.
	"boost::*",
	// C library allocation wrappers that allocate on the caller's behalf.
	"fn:malloc",
	"fn:calloc",
	"fn:realloc",
	"fn:reallocarray",
	"fn:strdup",
	"fn:strndup",
	"fn:__strdup",
	// glibc's internal aliases of its own functions, which its debug
	// information names (heaptrack's stacks): __GI___strdup is strdup.
	"fn:__GI_*",
	"fn:posix_memalign",
	"fn:aligned_alloc",
	"fn:memalign",
	"fn:_dl_*",
	"fn:__libc_*",
	"fn:_IO_*",
	// Frames massif could not name.
	"fn:???",
	// System headers and libraries (full paths and objects).
	"/usr/include/*",
	"/usr/local/include/*",
	"/lib/*",
	"/lib64/*",
	"/usr/lib/*",
	"/usr/lib64/*",
	"obj:???",
}

// library decides which frames are library code.
type library struct {
	patterns frameFilter
	memo     map[Frame]bool
}

func newLibrary(o *Options) *library {
	var texts []string
	if !o.NoDefaultLibrary {
		texts = append(texts, DefaultLibrary...)
	}
	texts = append(texts, o.Library...)
	return &library{patterns: compilePatterns(texts), memo: make(map[Frame]bool)}
}

// is reports whether f is library code. Results are remembered: the same
// frames recur in every snapshot of a run.
func (l *library) is(f Frame) bool {
	f.Addr = ""
	if v, ok := l.memo[f]; ok {
		return v
	}
	v := l.patterns.match(f)
	l.memo[f] = v
	return v
}
