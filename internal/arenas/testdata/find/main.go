// Command find prints, as JSON, what arenas.Find finds of glibc's
// allocator in a running process: the description the native backend's
// agent gets over the heap reader's socket. The agent's Python unit
// tests (driver/backend/native/agent/arena_test.py) run it to read a
// process of their own with it.
//
// Usage: go run ./internal/arenas/testdata/find PID [MALLINFO2-ADDRESS]
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/snapctl/snapctl/internal/arenas"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "find:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("usage: find PID [MALLINFO2-ADDRESS]")
	}
	pid, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	q := arenas.Query{DebugDirs: []string{"/usr/lib/debug"}}
	if len(args) == 2 {
		if q.Mallinfo2, err = strconv.ParseUint(args[1], 0, 64); err != nil {
			return err
		}
	}
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return err
	}
	defer mem.Close()
	g, err := arenas.Find(pid, &arenas.Process{Pid: pid, File: mem}, q)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(g)
}
