package gdb

import (
	"context"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
)

// The GDB/MI commands snapctl sends, one constructor each: the driver and
// the backends say what they ask of gdb (Continue, BreakDelete, Console...)
// and send it with Conn.Do or in a batch (Conn.SendBatch); the words of MI
// are written here alone.

// Names of the commands whose answers a caller tells apart in a batch.
const (
	NameBreakDelete = "-break-delete"
	NameBreakAfter  = "-break-after"
)

// Do sends cmd and waits for its result, as Send.
func (c *Conn) Do(ctx context.Context, cmd mi.Command) (*mi.Result, error) {
	return c.Send(ctx, cmd.Name, cmd.Args...)
}

func command(name string, args ...string) mi.Command { return mi.Command{Name: name, Args: args} }

// Console runs line as if typed at gdb's prompt (its CLI): the output
// comes back as console stream records.
func Console(line string) mi.Command {
	return command("-interpreter-exec", "console", mi.Quote(line))
}

// Python runs code, one line of Python, in gdb's Python (the agent's
// namespace once the agent is loaded).
func Python(code string) mi.Command { return Console(PythonLine(code)) }

// PythonLine is the CLI line that runs code in gdb's Python, for what is
// given to gdb as a line (a backend's measurement command, a setup line).
func PythonLine(code string) string { return "python " + code }

// Set sets one of gdb's settings (words: "print", "frame-arguments",
// "scalars").
func Set(words ...string) mi.Command { return command("-gdb-set", words...) }

// RemoteTimeout sets how long gdb waits for a remote stub's reply
// (remotetimeout, 2 s by default) to longer than every one of deadlines,
// snapctl's own. gdb gives up on a reply that takes longer and reads the
// late one as the next packet's answer: on a loaded machine valgrind's
// gdbserver through vgdb, or gdbserver still attaching to a server's
// threads, takes that long, and gdb then fails to connect ("Remote
// replied unexpectedly to 'vMustReplyEmpty'") or, mid-run, loses the
// target for good (docs/facts.md, fact 28). With it, a slow reply meets
// snapctl's deadline, which names what stalled.
func RemoteTimeout(deadlines ...time.Duration) mi.Command {
	return Set("remotetimeout", remoteSeconds(deadlines...))
}

// remoteSeconds is the longest of deadlines in whole seconds, plus one.
func remoteSeconds(deadlines ...time.Duration) string {
	longest := time.Duration(0)
	for _, d := range deadlines {
		longest = max(longest, d)
	}
	return strconv.Itoa(int(longest.Round(time.Second)/time.Second) + 1)
}

// Show reads one of gdb's settings.
func Show(name string) mi.Command { return command("-gdb-show", name) }

// Version asks gdb's version banner.
func Version() mi.Command { return command("-gdb-version") }

// Features lists what this gdb can do (python...).
func Features() mi.Command { return command("-list-features") }

// ThreadGroups lists the inferiors and their processes.
func ThreadGroups() mi.Command { return command("-list-thread-groups") }

// Run starts the program.
func Run() mi.Command { return command("-exec-run") }

// Arguments sets the program's arguments for Run.
func Arguments(args ...string) mi.Command { return command("-exec-arguments", args...) }

// Continue resumes the program (every thread, under all-stop).
func Continue() mi.Command { return command("-exec-continue") }

// ContinueThread resumes thread tid.
func ContinueThread(tid string) mi.Command { return command("-exec-continue", "--thread", tid) }

// Finish runs the selected frame until it returns.
func Finish() mi.Command { return command("-exec-finish") }

// FinishThread runs frame level of thread tid until it returns.
func FinishThread(tid, level string) mi.Command {
	return command("-exec-finish", "--thread", tid, "--frame", level)
}

// ExecInterrupt stops the running program.
func ExecInterrupt() mi.Command { return command("-exec-interrupt") }

// Attach attaches to process pid.
func Attach(pid int) mi.Command { return command("-target-attach", strconv.Itoa(pid)) }

// Detach detaches from the program, which runs on.
func Detach() mi.Command { return command("-target-detach") }

// Remote connects to a remote target through pipe ("| vgdb ...").
func Remote(pipe string) mi.Command { return command("-target-select", "remote", pipe) }

// BreakInsert inserts a breakpoint; args are -break-insert's words
// (InsertArgs, or options such as "-t" and "-p TID" and a location).
func BreakInsert(args ...string) mi.Command { return command("-break-insert", args...) }

// BreakDelete deletes breakpoints numbers, every breakpoint with none.
func BreakDelete(numbers ...string) mi.Command { return command(NameBreakDelete, numbers...) }

// BreakAfter has breakpoint number ignore its next n hits.
func BreakAfter(number string, n int) mi.Command {
	return command(NameBreakAfter, number, strconv.Itoa(n))
}

// BreakCondition sets breakpoint number's condition, gdb's expression
// cond as MI takes it (a word, quoted when it must be).
func BreakCondition(number, cond string) mi.Command {
	return command("-break-condition", number, mi.Word(cond))
}

// BreakEnable enables breakpoints numbers.
func BreakEnable(numbers ...string) mi.Command { return command("-break-enable", numbers...) }

// BreakDisable disables breakpoints numbers.
func BreakDisable(numbers ...string) mi.Command { return command("-break-disable", numbers...) }

// BreakList lists every breakpoint with its hit count.
func BreakList() mi.Command { return command("-break-list") }

// BreakInfo describes breakpoint number.
func BreakInfo(number string) mi.Command { return command("-break-info", number) }

// ThreadInfo describes threads tid (at most one), every thread with none.
func ThreadInfo(tid ...string) mi.Command { return command("-thread-info", tid...) }

// SelectThread makes thread tid the current one.
func SelectThread(tid string) mi.Command { return command("-thread-select", tid) }

// SelectFrame makes frame level of the current thread the current one.
func SelectFrame(level string) mi.Command { return command("-stack-select-frame", level) }

// Frames lists the current thread's frames; with bounds, from the first
// to the last given ("0", "31").
func Frames(bounds ...string) mi.Command { return command("-stack-list-frames", bounds...) }

// ThreadFrames lists thread tid's frames; with bounds, as Frames.
func ThreadFrames(tid string, bounds ...string) mi.Command {
	return command("-stack-list-frames", append([]string{"--thread", tid}, bounds...)...)
}

// Evaluate evaluates expr, an expression of the program's language, in
// the current frame.
func Evaluate(expr string) mi.Command { return command("-data-evaluate-expression", mi.Quote(expr)) }

// EvaluateThread evaluates expr in thread tid's current frame.
func EvaluateThread(tid, expr string) mi.Command {
	return command("-data-evaluate-expression", "--thread", tid, mi.Quote(expr))
}

// ReadMemory reads n bytes of the program's memory at addr.
func ReadMemory(addr uint64, n int) mi.Command {
	return command("-data-read-memory-bytes", fmt.Sprintf("%#x", addr), strconv.Itoa(n))
}

// WriteMemory writes data into the program's memory at addr.
func WriteMemory(addr uint64, data []byte) mi.Command {
	return command("-data-write-memory-bytes", fmt.Sprintf("%#x", addr), hex.EncodeToString(data))
}

// DisassembleAt disassembles the function at addr ("-a": the whole
// function around it), without source lines.
func DisassembleAt(addr uint64) mi.Command {
	return command("-data-disassemble", "-a", fmt.Sprintf("%#x", addr), "--", "0")
}

// Sender is what sends an MI command: a Debugger, an mi.Client (the
// early gdb's, the checking gdb's).
type Sender interface {
	Send(ctx context.Context, cmd string, args ...string) (*mi.Result, error)
}

// Send sends cmd through s and waits for its result, as Conn.Do.
func Send(ctx context.Context, s Sender, cmd mi.Command) (*mi.Result, error) {
	return s.Send(ctx, cmd.Name, cmd.Args...)
}
