package plan

import (
	"fmt"
	"strings"
)

// Error is one problem in a plan, with its position. Key is the path of the
// offending key, such as "breakpoints[1].skip" (breakpoints counted from 0);
// it is empty for problems of the file as a whole.
//
//	plan.yaml:12:5: breakpoints[1].skp: unknown key (did you mean "skip"?)
type Error struct {
	File         string
	Line, Column int // 1-based; 0 when unknown
	Key          string
	Msg          string
	Err          error // the underlying error, if any (reading the file, YAML syntax)
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(Pos{File: e.File, Line: e.Line, Column: e.Column}.String())
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(e.Key)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Unwrap returns the underlying error, if any.
func (e *Error) Unwrap() error { return e.Err }

// Pos returns the error's position.
func (e *Error) Pos() Pos { return Pos{File: e.File, Line: e.Line, Column: e.Column} }

// ErrorList is every problem found in one plan, in file order. Parse
// returns one (never empty) when the plan is invalid; errors.As finds its
// first *Error.
type ErrorList []*Error

// Error prints one problem per line.
func (l ErrorList) Error() string {
	msgs := make([]string, len(l))
	for i, e := range l {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "\n")
}

// Unwrap returns the individual errors.
func (l ErrorList) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// suggest returns ` (did you mean "x"?)` for the known key closest to key,
// or "" when none is close.
func suggest(key string, known []string) string {
	best, bestD := "", -1
	lk := strings.ToLower(key)
	for _, k := range known {
		d := editDistance(lk, k)
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	// Allow one edit for short keys, two for longer ones, and never so
	// many that most of the key changes.
	limit := 1
	if len(key) >= 5 {
		limit = 2
	}
	if best == "" || bestD > limit || bestD >= len(key) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Damerau–Levenshtein distance (optimal string
// alignment) between a and b: insertions, deletions, substitutions and
// transpositions of adjacent bytes each cost one.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		// Plan keys are short; a very long key is not a typo of one.
		return max(len(a), len(b))
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
