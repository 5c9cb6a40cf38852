package driver

import (
	"path/filepath"
	"testing"
)

// A spool that could not create its file reports that, even though no
// record was written: run.json must not silently lack its stops.
func TestSpoolCreateErrorNotEmpty(t *testing.T) {
	sp := newSpool("stops-*.jsonl")
	sp.dir = filepath.Join(t.TempDir(), "missing")
	sp.add(map[string]int{"seq": 1})
	defer sp.close()
	err := sp.each(func([]byte) error { return nil })
	if err == nil {
		t.Fatal("each on a spool without a file: nil error")
	}
}
