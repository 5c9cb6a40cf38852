package heaptrack

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestMarkReader: the FIFO's bytes, the library's with marks written
// into them by gdb's agent, split into the library's stream and the marks,
// however the reads cut them: a mark in the middle of a module's line
// (the library wrote out its buffer between the pieces of the line, fact
// 75), one with an empty buffer, two in a row.
func TestMarkReader(t *testing.T) {
	stream := "v 10100 3\nm 1b /lib64/ld-linux-x86-64.so.2 7ffff7fca000 0 d58 1000 25111 27000 9c7c" +
		"\x00snapctl-mark 1 12\n 31900 29d8\n" +
		" 31900 29d8\n+ 10 1 55\n" +
		"\x00snapctl-mark 2 0\n" +
		"\x00snapctl-mark 3 9\n- 55\nc 1\n" +
		"- 55\nc 1\n"
	// The buffer a mark carries comes again when the library writes it
	// out (forward drops it then).
	wantData := "v 10100 3\nm 1b /lib64/ld-linux-x86-64.so.2 7ffff7fca000 0 d58 1000 25111 27000 9c7c" +
		" 31900 29d8\n+ 10 1 55\n- 55\nc 1\n"
	wantMarks := []string{"1: 31900 29d8\n", "2:", "3:- 55\nc 1\n"}
	for size := 1; size <= len(stream); size++ {
		var data strings.Builder
		var marks []string
		m := &markReader{
			send: func(b []byte) error { data.Write(b); return nil },
			mark: func(k int, pending []byte) error {
				marks = append(marks, fmt.Sprintf("%d:%s", k, pending))
				return nil
			},
		}
		for i := 0; i < len(stream); i += size {
			if err := m.feed([]byte(stream[i:min(i+size, len(stream))])); err != nil {
				t.Fatalf("reads of %d bytes: %v", size, err)
			}
		}
		if diff := cmp.Diff(wantData, data.String()); diff != "" {
			t.Errorf("reads of %d bytes: the library's stream (-want +got):\n%s", size, diff)
		}
		if diff := cmp.Diff(wantMarks, marks); diff != "" {
			t.Errorf("reads of %d bytes: marks (-want +got):\n%s", size, diff)
		}
	}
	for _, bad := range []string{"x\x00snapctl-cut 1 2\nab", "\x00snapctl-mark 1 99999\n", "\x00" + strings.Repeat("y", 80)} {
		m := &markReader{send: func([]byte) error { return nil }, mark: func(int, []byte) error { return nil }}
		if err := m.feed([]byte(bad)); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
