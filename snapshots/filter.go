package snapshots

import (
	"path"
	"strconv"
	"strings"
)

// A FramePattern selects frames by name. It is used for library frames, for
// --ignore and for --focus. Its text is a glob in which `*` matches any run
// of characters, including `/` and `::`, and every other character matches
// itself (`?` is literal, so `???` means massif's unknown frame).
//
// Without a prefix a pattern matches a frame when it matches any of:
//
//   - the function as massif printed it ("Scheduler::submit(int)"),
//   - its qualified name, without return type and parameters
//     ("std::vector<int>::_M_realloc_insert" for "void std::vector<int>::
//     _M_realloc_insert<int const&>(...)"),
//   - the file, or its base name, and "file:line" ("leak.c", "leak.c:17"),
//   - the object of a `fn (in /lib/x.so)` frame.
//
// A prefix restricts the match: "fn:PAT" functions only, "file:PAT" files
// (and file:line) only, "obj:PAT" objects only.
type FramePattern struct {
	text string
	kind patternKind
	glob string
}

type patternKind int

const (
	matchAny patternKind = iota
	matchFunction
	matchFile
	matchObject
)

// ParseFramePattern reads a pattern as FramePattern documents.
func ParseFramePattern(s string) FramePattern {
	p := FramePattern{text: s, glob: s}
	for prefix, kind := range map[string]patternKind{"fn:": matchFunction, "file:": matchFile, "obj:": matchObject} {
		if strings.HasPrefix(s, prefix) {
			p.kind, p.glob = kind, s[len(prefix):]
		}
	}
	return p
}

// String returns the pattern as it was written.
func (p FramePattern) String() string { return p.text }

// Match reports whether the pattern selects f.
func (p FramePattern) Match(f Frame) bool {
	if p.kind == matchAny || p.kind == matchFunction {
		if globMatch(p.glob, f.Function) {
			return true
		}
		if q := qualifiedName(f.Function); q != f.Function && globMatch(p.glob, q) {
			return true
		}
	}
	if (p.kind == matchAny || p.kind == matchFile) && f.File != "" {
		if globMatch(p.glob, f.File) || globMatch(p.glob, f.File+":"+strconv.Itoa(f.Line)) {
			return true
		}
		if base := path.Base(f.File); base != f.File &&
			(globMatch(p.glob, base) || globMatch(p.glob, base+":"+strconv.Itoa(f.Line))) {
			return true
		}
	}
	if (p.kind == matchAny || p.kind == matchObject) && f.Object != "" {
		return globMatch(p.glob, f.Object)
	}
	return false
}

// globMatch matches s against a pattern where only `*` is special.
func globMatch(pattern, s string) bool {
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return pattern == s
	}
	if !strings.HasPrefix(s, pattern[:star]) {
		return false
	}
	s = s[star:]
	pattern = pattern[star+1:]
	for {
		next := strings.IndexByte(pattern, '*')
		if next < 0 {
			return strings.HasSuffix(s, pattern)
		}
		i := strings.Index(s, pattern[:next])
		if i < 0 {
			return false
		}
		s = s[i+next:]
		pattern = pattern[next+1:]
	}
}

// qualifiedName strips a demangled C++ name of its return type and
// parameter list: "void std::vector<int>::_M_realloc_insert<int&>(int&)"
// gives "std::vector<int>::_M_realloc_insert<int&>". Names that are not
// C++ come back unchanged. "operator new(unsigned long)" gives
// "operator new".
func qualifiedName(fn string) string {
	start, end := qualifiedSpan(fn)
	return fn[start:end]
}

// withoutReturnType drops the return type of a demangled C++ template
// function: "std::pair<...> std::unordered_map<...>::emplace<int&>(int&)"
// gives "std::unordered_map<...>::emplace<int&>(int&)".
func withoutReturnType(fn string) string {
	start, _ := qualifiedSpan(fn)
	return fn[start:]
}

// operators are the C++ operator tokens that follow "operator", longest
// first so that a match is the longest one.
var operators = []string{
	"<<=", ">>=", "<=>", "->*",
	"<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "++", "--", "+=", "-=", "*=", "/=", "%=", "^=", "&=", "|=", "->", "[]", "()",
	",", "<", ">", "=", "!", "+", "-", "*", "/", "%", "^", "&", "|", "~",
}

// operatorToken returns the length of the operator token at the start of
// s (what follows "operator"), 0 for none (operator new, a conversion
// operator). Only one token is taken: in "operator[]<char [8]>(...)" the
// '<' opens template arguments.
func operatorToken(s string) int {
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	return 0
}

// qualifiedSpan returns where the qualified name of fn starts and ends.
func qualifiedSpan(fn string) (start, end int) {
	depth := 0
	end = len(fn)
	opEnd := -1 // index just past the last "operator..." token
	for i := 0; i < len(fn); i++ {
		if strings.HasPrefix(fn[i:], "(anonymous namespace)") {
			i += len("(anonymous namespace)") - 1
			continue
		}
		if strings.HasPrefix(fn[i:], "operator") && (i == 0 || fn[i-1] == ':' || fn[i-1] == ' ') {
			i += len("operator")
			i += operatorToken(fn[i:])
			opEnd = i
			i--
			continue
		}
		switch fn[i] {
		case '<', '{':
			depth++
		case '>', '}':
			if depth > 0 {
				depth--
			}
		case '(':
			if depth == 0 {
				end = i
				i = len(fn)
			}
		case ' ':
			if depth == 0 && i != opEnd {
				start = i + 1
			}
		}
	}
	if start >= end {
		return 0, len(fn)
	}
	return start, end
}

// frameFilter is a compiled list of patterns.
type frameFilter []FramePattern

func compilePatterns(texts []string) frameFilter {
	f := make(frameFilter, 0, len(texts))
	for _, t := range texts {
		if t != "" {
			f = append(f, ParseFramePattern(t))
		}
	}
	return f
}

func (ff frameFilter) match(f Frame) bool {
	for _, p := range ff {
		if p.Match(f) {
			return true
		}
	}
	return false
}

// matchFrameExact reports whether a frame of an allocation stack is the
// frame want, as a debugger names it: same function, same file base name
// when both have one, and same line unless want.Line is 0, which matches
// any line of the function.
func matchFrameExact(want, f Frame) bool {
	if want.Function != f.Function {
		return false
	}
	if want.File != "" && f.File != "" && path.Base(want.File) != path.Base(f.File) {
		return false
	}
	return want.Line == 0 || want.Line == f.Line
}
