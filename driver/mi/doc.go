// Package mi is a GDB/MI client: it runs gdb, sends it commands and parses
// what gdb answers. It is the only way snapctl talks to gdb.
//
// # GDB/MI
//
// GDB/MI (the "machine interface", chapter "The GDB/MI Interface" of the
// GDB manual) is a line-oriented protocol spoken over gdb's standard input
// and output when gdb runs with --interpreter=mi3. We write commands, one
// per line, and gdb writes records, one per line:
//
//	-> 7-break-insert leak.c:15
//	7^done,bkpt={number="1",type="breakpoint",func="handle_request",line="15",...}
//	(gdb)
//
// A command may start with a token, a string of digits. gdb copies the
// token onto the result record that answers the command, so a client can
// match answers to questions. Send gives every command a fresh token and
// waits for the result record that carries it.
//
// gdb prints three kinds of records:
//
//   - Result records (^) answer one command: ^done (with results),
//     ^running (the target was resumed), ^connected, ^exit and
//     ^error,msg="..." (returned by Send as an *Error).
//   - Async records report what happened without being asked: exec
//     records (*) for the target's execution state, *running and
//     *stopped,reason="breakpoint-hit",...; notify records (=) such as
//     =thread-created and =breakpoint-modified; status records (+). They
//     arrive on the Events channel.
//   - Stream records carry text: console (~) is what the CLI would have
//     printed, target (@) is output of the target or of its remote stub,
//     log (&) is gdb's own commentary. Stream records that arrive between a
//     command and its result belong to that command and come back in
//     Result.Streams; the others go to Events.
//
// After each group of records gdb prints the prompt "(gdb)".
//
// Results are name=value pairs. A value is a c-string ("text" with C
// escapes), a tuple ({name=value,...}) or a list ([value,...] or
// [name=value,...]). A record's results form a tuple, so one API reads them
// all: r.String("frame.func"), r.Int("thread-id"), r.List("stack").
//
// # Synchronous and asynchronous execution
//
// By default a command that resumes the target (-exec-continue, -exec-run)
// answers ^running at once and gdb then reads no further command until the
// target stops, when *stopped arrives. With mi-async on (Options.Async),
// gdb keeps reading commands while the target runs, and -exec-interrupt
// stops it: a *stopped,reason="signal-received" record follows.
//
// # Valgrind through vgdb
//
// snapctl never runs the program under gdb itself. It starts the program
// under `valgrind --tool=massif --vgdb=yes --vgdb-error=0`: valgrind
// contains a gdbserver, and vgdb is the relay between gdb's remote
// protocol and that gdbserver (valgrind and vgdb talk through FIFOs named
// after --vgdb-prefix). gdb runs vgdb as a pipe:
//
//	-target-select remote | vgdb --vgdb-prefix=/tmp/run/vgdb --pid=4242
//
// Send passes arguments as given, and here they must not be quoted:
// -target-select hands its raw argument text to the CLI's `target` command,
// which would take the quotes for part of the device name. gdb answers
// ^connected, after a *stopped record without a reason for the stop where
// valgrind waits. From then on breakpoints and stops work as with any
// remote target, and `monitor CMD` (-interpreter-exec console "monitor
// CMD", quoted with Quote) sends CMD to valgrind's gdbserver. Massif's
// `monitor detailed_snapshot FILE` writes a heap snapshot and prints
// nothing; an error such as "error: cannot take snapshot before execution
// has started" arrives as target (@) stream text while the command's result
// is still ^done, so callers must read Result.Target().
//
// # Processes and failure
//
// Start runs gdb in a process group of its own, which vgdb joins. When gdb
// exits or is killed, every pending and later Send fails at once with an
// *ExitError that carries gdb's exit status and the tail of its stderr.
// Close asks gdb to exit, kills the process group after a grace period and
// returns only when no process or goroutine of the client is left.
package mi
