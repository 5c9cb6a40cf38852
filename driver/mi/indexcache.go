package mi

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// gdb's index cache: gdb indexes the DWARF of every file it reads that
// carries no index of its own, at every start. For libc6-dbg's debug file
// that is 0.2 to 0.35 s of processor time per session, most of a short
// session's cost and, when snapctl attaches, paid with the process
// stopped (docs/facts.md, fact 156). With the cache on, gdb keeps each
// index it builds in a file named by the build id of what it indexed, and
// the next gdb reads it instead.
//
// The cache is snapctl's own directory, under the user's cache directory
// ($XDG_CACHE_HOME or ~/.cache), so a gdb the user runs by hand is not
// changed. gdb itself never removes an entry and every build of a program
// adds one, so snapctl bounds the directory: once per process, before its
// first gdb, it removes the oldest entries while the directory holds more
// than indexCacheLimit, and any temporary file of a gdb that died while
// writing it.
const (
	indexCacheLimit = 256 << 20
	// indexCacheStale is the age past which a temporary file
	// (gdb writes each index to NAME.gdb-index-XXXXXX first, then
	// renames it) is taken for a dead gdb's.
	indexCacheStale = time.Hour
)

var indexCache struct {
	once sync.Once
	args []string
}

// indexCacheArgs are the arguments that turn gdb's index cache on in
// snapctl's directory, or none when that directory cannot be made.
func indexCacheArgs() []string {
	indexCache.once.Do(func() {
		if base, err := os.UserCacheDir(); err == nil {
			indexCache.args = indexCacheIn(filepath.Join(base, "snapctl", "gdb-index"), time.Now())
		}
	})
	return indexCache.args
}

// indexCacheIn makes dir, prunes it and returns the arguments that make
// gdb keep its indexes there; none when dir cannot be made.
func indexCacheIn(dir string, now time.Time) []string {
	// gdb reads the rest of the line as the directory's name.
	if strings.ContainsAny(dir, "\n\r") || os.MkdirAll(dir, 0o700) != nil {
		return nil
	}
	pruneIndexCache(dir, indexCacheLimit, now)
	return []string{
		"-iex", "set index-cache directory " + dir,
		"-iex", "set index-cache enabled on",
	}
}

// pruneIndexCache removes the oldest indexes in dir until they hold at
// most limit bytes, and gdb's temporary files older than
// indexCacheStale; a file of any other name stays.
func pruneIndexCache(dir string, limit int64, now time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type index struct {
		path string
		size int64
		mod  time.Time
	}
	var indexes []index
	var total int64
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if strings.Contains(e.Name(), ".gdb-index-") {
			if now.Sub(info.ModTime()) > indexCacheStale {
				os.Remove(path)
			}
			continue
		}
		if !strings.HasSuffix(e.Name(), ".gdb-index") {
			continue
		}
		indexes = append(indexes, index{path, info.Size(), info.ModTime()})
		total += info.Size()
	}
	slices.SortFunc(indexes, func(a, b index) int { return a.mod.Compare(b.mod) })
	for _, x := range indexes {
		if total <= limit {
			break
		}
		if os.Remove(x.path) == nil {
			total -= x.size
		}
	}
}
