package snapshots

import (
	"path/filepath"
	"testing"
)

// loadSnapshot reads the snapshot a spec (FILE#SEL) names, with FILE
// relative to testdata/analysis.
func loadSnapshot(t testing.TB, spec string) *Snapshot {
	t.Helper()
	path, sel := SplitSpec(spec)
	f, err := ParseFile(filepath.Join("..", "testdata", "analysis", path))
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Select(sel)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
