package snapshots

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// update rewrites the golden files: go test ./snapshots -update.
var update = flag.Bool("update", false, "rewrite the golden files")

// checkGolden compares got with testdata/golden/NAME (the renderers of whole
// files) or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	checkGoldenFile(t, filepath.Join("testdata", "golden", name), got)
}

// checkAnalysisGolden is checkGolden for the diff and report renderers,
// whose goldens live beside their recorded runs in testdata/analysis/golden.
func checkAnalysisGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	checkGoldenFile(t, filepath.Join("..", "testdata", "analysis", "golden", name), got)
}

func checkGoldenFile(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./snapshots -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got):\n%s", path, diff)
	}
}
