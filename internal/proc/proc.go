// Package proc reads what Linux's /proc says of a process: its state and
// parent, its command name, its status fields.
package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// State is what /proc/PID/stat says of a process: its state letter (R,
// S, D, T, t, Z, X...) and its parent's pid; OK is false once it is gone.
type State struct {
	Pid   int
	State byte
	PPid  int
	OK    bool
}

// Stat reads process pid's state.
func Stat(pid int) State {
	ps := State{Pid: pid}
	if pid <= 0 {
		return ps
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ps
	}
	// "pid (comm) S ppid ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return ps
	}
	fields := strings.Fields(string(data[i+2:]))
	if len(fields) < 2 {
		return ps
	}
	ps.State = fields[0][0]
	ps.PPid, _ = strconv.Atoi(fields[1])
	ps.OK = true
	return ps
}

// Alive reports whether the process exists and is no zombie.
func (s State) Alive() bool { return s.OK && s.State != 'Z' && s.State != 'X' }

// Alive reports whether process pid exists and is no zombie.
func Alive(pid int) bool { return Stat(pid).Alive() }

// Name is process pid's command name (/proc/PID/comm), "unknown" when it
// cannot be read.
func Name(pid int) string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(data))
}

// Status reads /proc/PID/status into its fields.
func Status(pid int) (map[string]string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := make(map[string]string)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}
