package testenv

import (
	"compress/gzip"
	"io"
	"os"
	"testing"
)

// Gunzip is the text of the gzip file at path, such as a snapshot a run
// kept (snapshots/*.massif.gz); it fails the test when the file is not
// gzip whole.
func Gunzip(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return string(data)
}
