package proc

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/snapctl/snapctl/internal/child"
)

// The kernel's task flags in /proc/PID/stat's ninth field.
const (
	pfExiting  = 0x4   // PF_EXITING: do_exit has begun
	pfSignaled = 0x400 // PF_SIGNALED: killed by a fatal signal
)

// Fate says whether process pid has ended or is ending, and how, as far
// as /proc tells: "" while it runs; from a zombie's wait status "was
// killed by SIGKILL" or "exited with status 1"; "is dying of a signal"
// or "is exiting" while its exit is under way (a tracer may hold it at
// its exit), ended false; "has exited" once its parent has reaped it,
// the status gone with it.
func Fate(pid int) (fate string, ended bool) {
	if pid <= 0 {
		return "", false
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "has exited", true
	}
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return "", false
	}
	f := strings.Fields(string(data[i+2:]))
	if len(f) < 7 {
		return "", false
	}
	if f[0] == "Z" || f[0] == "X" {
		if len(f) > 49 {
			if n, err := strconv.Atoi(f[49]); err == nil {
				ws := syscall.WaitStatus(n)
				switch {
				case ws.Signaled():
					return "was killed by " + child.SignalName(ws.Signal()), true
				case ws.Exited():
					return fmt.Sprintf("exited with status %d", ws.ExitStatus()), true
				}
			}
		}
		return "has exited", true
	}
	flags, _ := strconv.ParseUint(f[6], 10, 64)
	switch {
	case flags&pfExiting == 0:
		return "", false
	case flags&pfSignaled != 0:
		return "is dying of a signal", false
	}
	return "is exiting", false
}
