// Package snapshots parses massif heap snapshots, diffs them per allocation call site, finds growing sites and renders the results.
package snapshots
