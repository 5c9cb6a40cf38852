package snapshots

import (
	"bytes"
	"io"
	"os"
	"strconv"
	"sync"
	"testing"
)

// benchFile is a massif file of 20 snapshots, every other one detailed with
// 10,000 tree lines of C++-style frames drawn from a pool of 2,000, about
// 10 MB in all (bench/msprint.sh measures the full 100 MB case against
// ms_print).
var benchFile = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	b.WriteString("desc: --threshold=0\ncmd: ./bigapp\ntime_unit: i\n")
	frames := make([]string, 2000)
	for i := range frames {
		frames[i] = "0x" + strconv.FormatInt(int64(0x400000+16*i), 16) + ": Module" + strconv.Itoa(i%53) +
			"::Handler<std::vector<int> >::run_" + strconv.Itoa(i) + "(int, char*) (module" + strconv.Itoa(i%53) + ".cpp:" + strconv.Itoa(10+i) + ")"
	}
	seq := 0
	for s := 0; s < 20; s++ {
		kind := "empty"
		if s%2 == 1 {
			kind = "detailed"
		}
		// 1000 sites of 10 lines each: a chain of 9 callers.
		const sites, chain = 1000, 9
		total := int64(sites * 100)
		b.WriteString("#-----------\nsnapshot=" + strconv.Itoa(s) + "\n#-----------\ntime=" + strconv.Itoa(s*1000) +
			"\nmem_heap_B=" + strconv.FormatInt(total, 10) + "\nmem_heap_extra_B=8\nmem_stacks_B=0\nheap_tree=" + kind + "\n")
		if kind == "empty" {
			continue
		}
		b.WriteString("n" + strconv.Itoa(sites) + ": " + strconv.FormatInt(total, 10) + " (heap allocation functions) malloc/new/new[], --alloc-fns, etc.\n")
		for i := 0; i < sites; i++ {
			for d := 1; d <= chain+1; d++ {
				k := 1
				if d == chain+1 {
					k = 0
				}
				seq = (seq*1103515245 + 12345) & 0x7fffffff
				b.WriteString(string(bytes.Repeat([]byte(" "), d)) + "n" + strconv.Itoa(k) + ": 100 " + frames[seq%len(frames)] + "\n")
			}
		}
	}
	return b.Bytes()
})

func BenchmarkParse(b *testing.B) {
	data := benchFile()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseTotals is the totals-only path: no trees are built.
func BenchmarkParseTotals(b *testing.B) {
	data := benchFile()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := ParseTotals(bytes.NewReader(data), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShow is `snapctl show`: streaming parse and text rendering.
func BenchmarkShow(b *testing.B) {
	data := benchFile()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), "bench", ReadOptions{})
		if err := Show(io.Discard, r, ShowOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseStopSnapshot parses one small detailed snapshot, as the
// driver does at every stop of a run: its cost is paid thousands of times.
func BenchmarkParseStopSnapshot(b *testing.B) {
	data, err := os.ReadFile("../testdata/massif/leak.detailed.massif")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(bytes.NewReader(data), "leak.detailed.massif"); err != nil {
			b.Fatal(err)
		}
	}
}
