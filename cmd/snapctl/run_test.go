package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
)

// parseRun runs `snapctl run ARGS` with a runner that only captures the
// options.
func parseRun(t *testing.T, args ...string) (*runOptions, error) {
	t.Helper()
	var got *runOptions
	root := newRootCmd("dev")
	for _, c := range root.Commands() {
		if c.Name() == "run" {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(newRunCmdWith(func(_ *cobra.Command, o *runOptions) error {
		got = o
		return nil
	}))
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs(append([]string{"run"}, args...))
	err := root.Execute()
	return got, err
}

func TestRunFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want runOptions
	}{
		{"plain", []string{"plan.yaml", "./bin"},
			runOptions{Format: "text", Plan: "plan.yaml", Binary: "./bin", Args: []string{}}},
		{"target flags pass through", []string{"--quiet", "plan.yaml", "./bin", "-v", "--out", "x"},
			runOptions{Format: "text", Quiet: true, Plan: "plan.yaml", Binary: "./bin", Args: []string{"-v", "--out", "x"}}},
		{"flags between plan and binary", []string{"plan.yaml", "--format", "json", "--timeout", "1m", "./bin", "a b"},
			runOptions{Format: "json", Timeout: time.Minute, Plan: "plan.yaml", Binary: "./bin", Args: []string{"a b"}}},
		{"dash dash", []string{"--out", "dir with space", "--force", "--trace", "--", "plan.yaml", "./bin", "--", "-x"},
			runOptions{Out: "dir with space", Force: true, Trace: true, Format: "text", Plan: "plan.yaml", Binary: "./bin", Args: []string{"--", "-x"}}},
		{"tools", []string{"--valgrind", "/opt/vg", "--gdb", "gdb-multiarch", "p", "b"},
			runOptions{Format: "text", Valgrind: "/opt/vg", GDB: "gdb-multiarch", Plan: "p", Binary: "b", Args: []string{}}},
		{"keep snapshots", []string{"--keep-snapshots", "changed", "p", "b"},
			runOptions{Format: "text", KeepSnapshots: "changed", Plan: "p", Binary: "b", Args: []string{}}},
		{"backend", []string{"--backend", "native", "p", "b"},
			runOptions{Format: "text", Backend: "native", Plan: "p", Binary: "b", Args: []string{}}},
		{"sites imply native", []string{"--sites", "--heaptrack", "/opt/heaptrack", "p", "b"},
			runOptions{Format: "text", Sites: true, Heaptrack: "/opt/heaptrack", Backend: "native", Plan: "p", Binary: "b", Args: []string{}}},
		{"sites with native", []string{"--backend", "native", "--sites", "p", "b"},
			runOptions{Format: "text", Sites: true, Backend: "native", Plan: "p", Binary: "b", Args: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRun(t, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, *got); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"plan.yaml"},
		{"--format", "xml", "plan.yaml", "./bin"},
		{"--no-such-flag", "plan.yaml", "./bin"},
		{"--timeout", "-1s", "plan.yaml", "./bin"},
		{"--keep-snapshots", "some", "plan.yaml", "./bin"},
		{"--backend", "memchek", "plan.yaml", "./bin"},
		{"--backend", "memcheck", "--sites", "plan.yaml", "./bin"},
		{"--backend", "massif", "--sites", "plan.yaml", "./bin"},
	} {
		_, err := parseRun(t, args...)
		if code, _ := describe(err); code != exitUsage {
			t.Errorf("run %q: exit code %d (%v), want %d", args, code, err, exitUsage)
		}
	}
}

// TestSitesUsageMessage: --sites with a backend that records sites
// already names the backend whose recording --sites is.
func TestSitesUsageMessage(t *testing.T) {
	_, err := parseRun(t, "--backend", "massif", "--sites", "plan.yaml", "./bin")
	want := "--sites is the native backend's per-site recording: massif records sites already; drop --sites or use --backend native"
	if code, _ := describe(err); code != exitUsage || err == nil || err.Error() != want {
		t.Errorf("run --backend massif --sites: exit code %d (%v), want %d and %q", code, err, exitUsage, want)
	}
}

// TestAttachUsageErrors: attach takes a PLAN and a PID, and only the
// native backend.
func TestAttachUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"plan.yaml"}, `attach needs a PLAN and a PID: snapctl attach PLAN PID (got ["plan.yaml"])`},
		{[]string{"plan.yaml", "--timeout", "5s"}, `attach needs a PLAN and a PID: snapctl attach PLAN PID (got ["plan.yaml"])`},
		{[]string{"plan.yaml", "notapid"}, `attach needs a PLAN and a PID: snapctl attach PLAN PID (got ["notapid"])`},
		{[]string{"plan.yaml", "0"}, `attach needs a PLAN and a PID: snapctl attach PLAN PID (got ["0"])`},
		{[]string{"plan.yaml", "42", "extra"}, `attach needs a PLAN and a PID: snapctl attach PLAN PID (got ["42" "extra"])`},
		{[]string{"--backend", "massif", "plan.yaml", "42"}, "attach: the massif backend cannot attach to a running process, it must start the program; attach uses the native backend"},
	} {
		args := c.args
		root := newRootCmd("dev")
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(append([]string{"attach"}, args...))
		err := root.Execute()
		if code, _ := describe(err); code != exitUsage || err == nil || !strings.HasPrefix(err.Error(), c.msg) {
			t.Errorf("attach %q: exit code %d (%v), want %d and %q", args, code, err, exitUsage, c.msg)
		}
	}
}
