package snapshots

import (
	"fmt"
	"strconv"
)

// FormatError reports a massif file that does not follow the format valgrind
// writes. It names the file and line and says what was expected there, the
// way debug/elf.FormatError does for object files:
//
//	massif file x.out:118: expected "mem_heap_B=", got "mem_heap=4"
type FormatError struct {
	File string // the name given to the parser
	Line int    // 1-based; the line after the last one for a truncated file
	Msg  string // what was wrong: `expected "mem_heap_B=", got "..."`
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("massif file %s:%d: %s", e.File, e.Line, e.Msg)
}

// quoteLine quotes a line for an error message, shortened so that a garbage
// megabyte-long line does not flood the terminal.
func quoteLine(b []byte) string {
	const max = 72
	if len(b) > max {
		return strconv.Quote(string(b[:max])) + "..."
	}
	return strconv.Quote(string(b))
}
