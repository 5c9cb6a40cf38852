package gdb

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestAgentCodeCache: agentload.py compiles a bundle's scripts once and
// keeps their code under the bundle's cache prefix for this Python; the
// next read loads it from there (a planted code object shows it), a
// damaged file is compiled again and replaced, and writing removes the
// bundle's files of other versions, the single agent of an older snapctl
// and what an interrupted write left, but not this bundle's for another
// Python nor another bundle's.
func TestAgentCodeCache(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb")
	dir := t.TempDir()
	script, second, loader := filepath.Join(dir, AgentScript), filepath.Join(dir, "second.py"), filepath.Join(dir, agentLoadScript)
	cache := filepath.Join(dir, "cache")
	for path, data := range map[string]string{script: AgentSource, second: "SECOND = location_resolves\n", loader: agentLoadSource} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(cache, 0o700); err != nil {
		t.Fatal(err)
	}
	prefix := filepath.Join(cache, "agent-core-0123456789abcdef")
	for _, name := range []string{
		"agent-core-fedcba9876543210-cpython-311-30b04f0.bin",       // another version's
		"agent-fedcba9876543210-cpython-311-30b04f0.bin",            // a single-file agent's
		"agent-core-0123456789abcdef-cpython-399-30909f0.bin",       // another Python's
		"agent-native-fedcba9876543210-cpython-311-30b04f0.bin",     // another bundle's
		"agent-core-0123456789abcdef-cpython-311-30b04f0.bin.1.tmp", // an interrupted write
		"unrelated",
	} {
		if err := os.WriteFile(filepath.Join(cache, name), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	py := "python\nimport json, marshal, os, sys\n" +
		"exec(open(" + PyString(loader) + ").read())\n" +
		"scripts, prefix = [" + PyString(script) + ", " + PyString(second) + "], " + PyString(prefix) + "\n" +
		"path = '%s-%s-%x.bin' % (prefix, sys.implementation.cache_tag, sys.hexversion)\n" +
		"def read(g):\n    for c in snapctl_agent_code(scripts, prefix):\n        exec(c, g)\n    return g\n" +
		"out = {}\n" +
		"g = read({'gdb': gdb})\n" +
		"out['compiled'] = g.get('SECOND') is g.get('location_resolves') is not None and os.path.exists(path)\n" +
		"out['left'] = sorted(os.listdir(os.path.dirname(path)))\n" +
		"with open(path, 'wb') as f:\n    marshal.dump([compile('MARK = \"cached\"', 'planted', 'exec'), compile('', 'planted', 'exec')], f)\n" +
		"out['cached'] = read({}).get('MARK')\n" +
		"with open(path, 'wb') as f:\n    f.write(b'not marshal data')\n" +
		"g = read({'gdb': gdb})\n" +
		"g2 = {'gdb': gdb}\n" +
		"for c in marshal.load(open(path, 'rb')):\n    exec(c, g2)\n" +
		"out['repaired'] = 'SECOND' in g and 'SECOND' in g2\n" +
		"out['name'] = os.path.basename(path)\n" +
		"print(json.dumps(out))\nend\n"
	cmds := filepath.Join(dir, "cmds")
	if err := os.WriteFile(cmds, []byte(py), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("gdb", "-batch", "-nx", "-x", cmds).CombinedOutput()
	if err != nil {
		t.Fatalf("gdb: %v\n%s", err, out)
	}
	var got struct {
		Compiled, Repaired bool
		Cached, Name       string
		Left               []string
	}
	if err := json.Unmarshal([]byte(LastLine(string(out))), &got); err != nil {
		t.Fatalf("gdb's answer %q: %v", out, err)
	}
	if !got.Compiled || got.Cached != "cached" || !got.Repaired {
		t.Errorf("compiled and kept %v, loaded the kept code %q, replaced a damaged file %v; want true, cached, true\n%s", got.Compiled, got.Cached, got.Repaired, out)
	}
	want := []string{got.Name, "agent-core-0123456789abcdef-cpython-399-30909f0.bin", "agent-native-fedcba9876543210-cpython-311-30b04f0.bin", "unrelated"}
	slices.Sort(want)
	if !slices.Equal(got.Left, want) {
		t.Errorf("cache holds %q, want %q", got.Left, want)
	}
}
