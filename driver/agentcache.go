package driver

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"path/filepath"
	"sync"
	"syscall"
)

// Python compiles agent.py at every read: 11-12 ms of a run's start in a
// gdb that has just started, against under 1 ms to load code compiled
// before (a gdb -batch script timing compile() and marshal.load()). So
// gdb's Python keeps the compiled code in the user's cache directory, as
// Python keeps its own in __pycache__ (agentload.py): one file per
// agent and Python version, named by a hash of agent.py and Python's
// cache tag and release; writing one removes those of other agents, so
// the directory holds what the installed snapctl uses. Where there is no usable cache
// directory, gdb compiles the script at every run as before.

//go:embed agentload.py
var agentLoadSource string

const agentLoadScript = "agentload.py"

var (
	agentCacheOnce sync.Once
	agentCachePath string
)

// agentCache is the prefix of the compiled agent's files in the user's
// cache directory ($XDG_CACHE_HOME/snapctl/agent-HASH, by default
// ~/.cache/snapctl), "" when there is none: no home, a directory snapctl
// cannot make, or one that is not the user's alone (its code runs in
// gdb).
func agentCache() string {
	agentCacheOnce.Do(func() {
		base, err := os.UserCacheDir()
		if err != nil {
			return
		}
		dir := filepath.Join(base, "snapctl")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return
		}
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Getuid() || fi.Mode().Perm()&0o022 != 0 {
			return
		}
		sum := sha256.Sum256([]byte(agentSource))
		agentCachePath = filepath.Join(dir, "agent-"+hex.EncodeToString(sum[:8]))
	})
	return agentCachePath
}

// agentRead is the Python that reads agent.py's definitions from script,
// which lies in a private directory: through agentload.py and the cache
// when there is one.
func agentRead(script string) string {
	compile := "exec(compile(open(" + pyString(script) + ").read(), " + pyString(script) + ", 'exec'), globals())\n"
	cache := agentCache()
	if cache == "" {
		return compile
	}
	loader := filepath.Join(filepath.Dir(script), agentLoadScript)
	if err := os.WriteFile(loader, []byte(agentLoadSource), 0o600); err != nil {
		return compile
	}
	return "exec(open(" + pyString(loader) + ").read())\n" +
		"exec(snapctl_agent_code(" + pyString(script) + ", " + pyString(cache) + "), globals())\n"
}
