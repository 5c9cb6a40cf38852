package snapshots

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// FoldedOptions tunes RenderFolded.
type FoldedOptions struct {
	// Lines names frames "make_payload (leak.c:12)" instead of
	// "make_payload", so that two call sites in one function stay apart.
	Lines bool
}

// RenderFolded writes the snapshot's tree as folded stacks, the input of
// flamegraph.pl and speedscope: one line per stack that holds bytes of its
// own, outermost caller first, then a space and the bytes:
//
//	main;handle_request;make_payload 1000
//
// Stacks that fold to the same text are merged; lines keep the order of the
// tree. A snapshot without a tree writes nothing.
func RenderFolded(w io.Writer, s *Snapshot, opts FoldedOptions) error {
	type line struct {
		stack string
		bytes int64
	}
	var lines []line
	index := make(map[string]int)
	var sb strings.Builder
	eachSelfStack(s.Tree, func(stack []*Node, self int64) {
		sb.Reset()
		if len(stack) == 0 {
			sb.WriteString(UnattributedFrameName)
		}
		for i := len(stack) - 1; i >= 0; i-- {
			f := exportFrame(stack[i])
			writeFoldedName(&sb, exportName(f))
			if opts.Lines && f.File != "" {
				sb.WriteString(" (")
				writeFoldedName(&sb, fileLine(f))
				sb.WriteByte(')')
			}
			if i > 0 {
				sb.WriteByte(';')
			}
		}
		k := sb.String()
		if i, ok := index[k]; ok {
			lines[i].bytes += self
			return
		}
		index[k] = len(lines)
		lines = append(lines, line{k, self})
	})
	bw := bufio.NewWriter(w)
	var num []byte
	for _, l := range lines {
		bw.WriteString(l.stack)
		bw.WriteByte(' ')
		num = strconv.AppendInt(num[:0], l.bytes, 10)
		bw.Write(num)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// writeFoldedName writes a frame name with the folded format's separator
// and line breaks replaced, so a name cannot split a stack.
func writeFoldedName(sb *strings.Builder, name string) {
	for i := 0; i < len(name); i++ {
		switch c := name[i]; c {
		case ';':
			sb.WriteByte(':')
		case '\n', '\r':
			sb.WriteByte(' ')
		default:
			sb.WriteByte(c)
		}
	}
}
