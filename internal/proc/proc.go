// Package proc reads what Linux's /proc says of a process: its state and
// parent, its command name, its status fields.
package proc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// State is what /proc/PID/stat says of a process: its state letter (R,
// S, D, T, t, Z, X...), its parent's pid and the CPU time it has used
// (user and system, in clock ticks); OK is false once it is gone.
type State struct {
	Pid   int
	State byte
	PPid  int
	CPU   uint64
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
	if len(fields) > 12 {
		// utime and stime, fields 14 and 15 of proc(5).
		utime, _ := strconv.ParseUint(fields[11], 10, 64)
		stime, _ := strconv.ParseUint(fields[12], 10, 64)
		ps.CPU = utime + stime
	}
	ps.OK = true
	return ps
}

// Alive reports whether the process exists and is no zombie.
func (s State) Alive() bool { return s.OK && s.State != 'Z' && s.State != 'X' }

// Tasks lists process pid's threads by their ids (/proc/PID/task); nil
// once pid is gone.
func Tasks(pid int) []int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var tids []int
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	return tids
}

// StoppedAt reads the stack pointer and program counter of thread tid of
// process pid while it is stopped, whoever traces it:
// /proc/PID/task/TID/syscall ends with them, in a system call ("NR
// ARGS... SP PC") or out of one ("-1 SP PC"); a thread that runs has
// "running" there.
func StoppedAt(pid, tid int) (sp, pc uint64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/syscall", pid, tid))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return 0, 0, false
	}
	sp, err1 := strconv.ParseUint(strings.TrimPrefix(f[len(f)-2], "0x"), 16, 64)
	pc, err2 := strconv.ParseUint(strings.TrimPrefix(f[len(f)-1], "0x"), 16, 64)
	return sp, pc, err1 == nil && err2 == nil
}

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

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Lo, Hi uint64 // the addresses it spans, [Lo, Hi)
	Perms  string // "r-xp"
	Offset uint64 // in the file
	// Path is the file mapped, spaces and all ("/opt/my dir/libx.so"),
	// without the kernel's " (deleted)"; "" for an anonymous mapping,
	// "[heap]" and the like for the kernel's own.
	Path    string
	Deleted bool // the file was deleted or replaced since it was mapped
}

// Maps reads process pid's mappings.
func Maps(pid int) ([]Mapping, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	var out []Mapping
	for _, line := range strings.Split(string(data), "\n") {
		if m, ok := parseMapping(line); ok {
			out = append(out, m)
		}
	}
	return out, nil
}

// parseMapping reads "LO-HI PERMS OFFSET DEV INODE   PATH": the path is
// the rest of the line after the inode's field and its padding, so that a
// path with spaces stays whole.
func parseMapping(line string) (Mapping, bool) {
	var m Mapping
	rest := line
	var fields [5]string
	for i := range fields {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			if i < 4 {
				return m, false
			}
			j = len(rest)
		}
		fields[i], rest = rest[:j], rest[j:]
	}
	lo, hi, ok := strings.Cut(fields[0], "-")
	if !ok {
		return m, false
	}
	var err1, err2, err3 error
	m.Lo, err1 = strconv.ParseUint(lo, 16, 64)
	m.Hi, err2 = strconv.ParseUint(hi, 16, 64)
	m.Offset, err3 = strconv.ParseUint(fields[2], 16, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return m, false
	}
	m.Perms = fields[1]
	m.Path = strings.TrimLeft(rest, " ")
	if p, ok := strings.CutSuffix(m.Path, " (deleted)"); ok && strings.HasPrefix(p, "/") {
		m.Path, m.Deleted = p, true
	}
	return m, true
}

// Auxv is the value of key (AT_BASE 7, AT_ENTRY 9...) in the auxiliary
// vector the kernel gave process pid, ok false when it has none.
func Auxv(pid int, key uint64) (value uint64, ok bool) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/auxv", pid))
	if err != nil {
		return 0, false
	}
	for i := 0; i+16 <= len(data); i += 16 {
		if k := binary.LittleEndian.Uint64(data[i:]); k == key {
			return binary.LittleEndian.Uint64(data[i+8:]), true
		} else if k == 0 {
			break
		}
	}
	return 0, false
}
