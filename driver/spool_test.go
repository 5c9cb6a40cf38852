package driver

import (
	"encoding/json"
	"path/filepath"
	"strings"
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

// each reads every record whole, those longer than its reading buffer
// (64 KiB) among short ones included, and reads them in place: a record
// costs no allocation, so that rewriting run.json through every stop so
// far makes no garbage that grows with the stops.
func TestSpoolEachLongLines(t *testing.T) {
	sp := newSpool(".test-*.jsonl")
	sp.dir = t.TempDir()
	defer sp.close()
	want := []string{"a", strings.Repeat("b", 200<<10), "c", strings.Repeat("d", 64<<10-2), strings.Repeat("e", 64<<10), "f"}
	for _, s := range want {
		sp.add(s)
	}
	var got []string
	if err := sp.each(func(line []byte) error {
		var s string
		if err := json.Unmarshal(line, &s); err != nil {
			return err
		}
		got = append(got, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("each read %d records, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d: %d bytes, want %d", i, len(got[i]), len(want[i]))
		}
	}

	short := newSpool(".test-*.jsonl")
	short.dir = t.TempDir()
	defer short.close()
	for i := range 10000 {
		short.add(i)
	}
	n := 0
	count := func(line []byte) error { n++; return nil }
	short.each(count) // the first reading flushes the writer
	allocs := testing.AllocsPerRun(5, func() {
		if err := short.each(count); err != nil {
			t.Fatal(err)
		}
	})
	// The reader and its buffer, whatever the number of records.
	if allocs > 10 {
		t.Errorf("reading 10,000 records made %v allocations, want at most 10", allocs)
	}
}

// eachFrom reads the records after a place taken with end, in the spool
// and in a view of it made later, and none when the place is the end:
// run.json's writing publishes the snapshots of the stops after the ones
// the run.json before listed, read back from the spool.
func TestSpoolEachFrom(t *testing.T) {
	sp := newSpool(".test-*.jsonl")
	sp.dir = t.TempDir()
	defer sp.close()
	for i := range 100 {
		sp.add(strings.Repeat("x", i))
	}
	at := sp.end()
	for i := 100; i < 150; i++ {
		sp.add(strings.Repeat("x", i))
	}
	v, err := sp.view()
	if err != nil {
		t.Fatal(err)
	}
	defer v.closeView()
	sp.add("after the view")
	read := func(s *spool, from mark) []int {
		var lens []int
		if err := s.eachFrom(from, func(line []byte) error {
			var str string
			if err := json.Unmarshal(line, &str); err != nil {
				return err
			}
			lens = append(lens, len(str))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return lens
	}
	for name, s := range map[string]*spool{"spool": sp, "view": v} {
		got := read(s, at)
		want := s.n - 100
		if len(got) != want || got[0] != 100 {
			t.Errorf("%s: %d records from the 101st, first %v; want %d, first 100", name, len(got), got[:min(1, len(got))], want)
		}
	}
	if got := read(sp, sp.end()); len(got) != 0 {
		t.Errorf("%d records from the end", len(got))
	}
}
