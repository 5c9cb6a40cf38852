// Package preflight checks, before anything runs, what a snapctl session
// needs: gdb, valgrind and vgdb (present, recent enough), the program
// (a native ELF executable, with debug info), the libraries it links, and
// whether ptrace is permitted. `snapctl run` stops on its errors and
// prints its findings as warnings; `snapctl doctor` prints every finding
// as a line of its own.
package preflight

import "strings"

// Finding is a problem that does not stop a session: snapctl run prints
// it as one warning sentence, snapctl doctor as a WARN line with its
// explanation below.
type Finding struct {
	// Check is doctor's name for what was checked: "debug info",
	// "symbols", "ptrace".
	Check string
	// Subject is what the finding is about, when it is a file: the
	// binary's or a library's path.
	Subject string
	// Summary says what is wrong, in a few words.
	Summary string
	// Explain says what it costs and what to do, one clause each.
	Explain []string
}

// String is the finding as one sentence: "SUBJECT SUMMARY: CLAUSE; CLAUSE".
func (f Finding) String() string {
	s := f.Summary
	if f.Subject != "" {
		s = f.Subject + " " + s
	}
	if len(f.Explain) > 0 {
		s += ": " + strings.Join(f.Explain, "; ")
	}
	return s
}
