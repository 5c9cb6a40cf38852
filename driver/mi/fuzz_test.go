package mi_test

import (
	"testing"

	"github.com/snapctl/snapctl/driver/mi"
)

// FuzzParseRecord checks that no line makes the parser panic, and that a
// record it accepts survives a round trip through Record.MI. Its seed
// corpus (testdata/fuzz/FuzzParseRecord) holds lines of the recorded
// sessions and malformed variants; plain `go test` runs it.
func FuzzParseRecord(f *testing.F) {
	f.Add([]byte(`^done,bkpt={number="1"},{number="1.1"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := mi.ParseRecord(line)
		if err != nil {
			if r != nil {
				t.Fatalf("a record and an error for %q", line)
			}
			return
		}
		text := r.MI()
		again, err := mi.ParseRecord([]byte(text))
		if err != nil {
			t.Fatalf("%q parsed, but its MI() %q does not: %v", line, text, err)
		}
		if again.MI() != text {
			t.Fatalf("round trip of %q changed it: %q then %q", line, text, again.MI())
		}
		if r.Type != again.Type || r.Token != again.Token || r.Class != again.Class || r.Text != again.Text {
			t.Fatalf("round trip of %q changed the record", line)
		}
	})
}
