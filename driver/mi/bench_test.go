package mi_test

import (
	"testing"

	"github.com/snapctl/snapctl/driver/mi"
)

// BenchmarkParseStop parses the *stopped record of a breakpoint hit, which
// snapctl parses at every stop.
func BenchmarkParseStop(b *testing.B) {
	line := []byte(stopLine)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := mi.ParseRecord(line); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseHuge parses a 10 MB -stack-list-frames answer.
func BenchmarkParseHuge(b *testing.B) {
	s, _ := hugeRecord(10 << 20)
	line := []byte(s)
	b.SetBytes(int64(len(line)))
	for b.Loop() {
		if _, err := mi.ParseRecord(line); err != nil {
			b.Fatal(err)
		}
	}
}
