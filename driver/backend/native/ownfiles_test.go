package native_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver"
	"github.com/snapctl/snapctl/internal/testenv"
	"github.com/snapctl/snapctl/runjson"
)

// TestSitesProgramOwnFiles: under --sites a program that closes every
// descriptor it inherited (in a loop up to its limit, or with
// close_range), then opens a file and writes 200 records into it, writes
// the same file and the same output as alone; heaptrack's stream never
// lands in its file. Its LD_PRELOAD (a library that prints which program
// loaded it) reaches it and the child it runs as given, and neither the
// shell nor the wrapper that starts it runs that library. A close loop
// leaves heaptrack's output alone where the limit of open files can be
// raised by one (it is then above the loop); close_range closes it, and
// the stops say why they have no per-site figures.
func TestSitesProgramOwnFiles(t *testing.T) {
	t.Parallel()
	testenv.MustHave(t, "gdb", "heaptrack")
	bin := testenv.Build(t, "../../testdata/sites/daemonfile.c")
	lib := testenv.Build(t, "../../testdata/sites/hello_preload.c", "-shared", "-fPIC")
	for _, mode := range []string{"loop", "range"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			aloneFile := filepath.Join(dir, "alone.out")
			cmd := exec.Command(bin, aloneFile, mode)
			cmd.Env = append(os.Environ(), "LD_PRELOAD="+lib)
			alone, err := cmd.Output()
			if err != nil {
				t.Fatalf("the program alone: %v", err)
			}
			want, _ := os.ReadFile(aloneFile)
			if len(want) != 2090 {
				t.Fatalf("the program alone wrote %d bytes, want 2090", len(want))
			}
			file := filepath.Join(dir, "sites.out")
			plan := fmt.Sprintf("backend: native\nnative:\n  sites: true\ntarget:\n  env: {LD_PRELOAD: %s}\nbreakpoints:\n  - location: record_done\n    every: 50\n", lib)
			var out testenv.Buffer
			_, m, err := runNative(t, driver.Options{Streams: driver.Streams{Stdout: &out}, Timeouts: driver.Timeouts{Timeout: 2 * time.Minute}}, plan, bin, file, mode)
			// Where the program closes heaptrack's descriptors, the
			// recording fails at every stop, and a run that measured
			// no call site exits 1 saying why; its run directory and
			// the program's own file are whole.
			ended := mode == "range" || !limitRaisable()
			switch {
			case ended && (err == nil || !strings.Contains(err.Error(), "the per-site recording failed at all 4 stops")):
				t.Fatalf("err %v, want the recording's failure at all 4 stops\n%s", err, out.String())
			case !ended && err != nil:
				t.Fatalf("%v\n%s", err, out.String())
			}
			got, _ := os.ReadFile(file)
			if string(got) != string(want) {
				t.Errorf("the program's file under --sites: %d bytes, alone %d; events %+v", len(got), len(want), m.Events)
			}
			if out.String() != strings.ReplaceAll(string(alone), aloneFile, file) {
				t.Errorf("output under --sites:\n%s\nalone:\n%s", out.String(), alone)
			}
			if len(m.Stops) != 4 {
				t.Fatalf("%d stops, events %+v", len(m.Stops), m.Events)
			}
			var failed []string
			for _, e := range m.Events {
				if e.Kind == runjson.EventSitesFailed {
					failed = append(failed, e.Message)
				}
			}
			raisable := limitRaisable()
			switch {
			case mode == "loop" && raisable && len(failed) > 0:
				t.Errorf("the close loop ended heaptrack's recording: %v", failed)
			case mode == "range" || !raisable:
				if len(failed) != 4 || !strings.Contains(failed[0], "the program closed heaptrack's output descriptor") {
					t.Errorf("sites-failed events: %v", failed)
				}
			}
		})
	}
}

// limitRaisable reports whether this process may raise its limit of open
// files above the soft one, as snapctl does for heaptrack's descriptor.
func limitRaisable() bool {
	data, _ := os.ReadFile("/proc/self/limits")
	for _, l := range strings.Split(string(data), "\n") {
		if f := strings.Fields(l); strings.HasPrefix(l, "Max open files") && len(f) >= 5 {
			return f[3] != f[4] || os.Geteuid() == 0 && hasCapSysResource()
		}
	}
	return false
}

// hasCapSysResource reports whether this process holds CAP_SYS_RESOURCE.
func hasCapSysResource() bool {
	data, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:\t"); ok {
			var caps uint64
			fmt.Sscanf(v, "%x", &caps)
			return caps&(1<<24) != 0
		}
	}
	return false
}
