package main

import (
	"os"

	"github.com/snapctl/snapctl/snapshots"
)

// splitSpec splits a snapshot reference FILE#SEL as snapshots.SplitSpec
// does, except that a reference naming an existing file is that whole
// file: a massif file with # in its name can be given bare.
func splitSpec(spec string) (path, sel string) {
	if spec != "-" {
		if fi, err := os.Stat(spec); err == nil && !fi.IsDir() {
			return spec, ""
		}
	}
	return snapshots.SplitSpec(spec)
}
