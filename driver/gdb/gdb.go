package gdb

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/plan"
	"github.com/snapctl/snapctl/runjson"
)

//go:embed agent.py
var AgentSource string

// AgentScript is agent.py's name in the private directory.
const AgentScript = "agent.py"

// AgentFailed starts the line the agent's loader prints when Python
// cannot load it.
const AgentFailed = "snapctl: agent failed: "

// PythonTry is the gdb command that runs code, lines of Python, inside a
// try, so that Python's own words reach snapctl after AgentFailed: gdb
// would only answer "Error while executing Python code", and its source
// command says nothing at all of a script that fails.
func PythonTry(code string) string {
	try := "try:\n"
	for _, line := range strings.SplitAfter(strings.TrimSuffix(code, "\n"), "\n") {
		try += "    " + line
	}
	return PythonLine("exec(" + PyString(try+"\nexcept Exception as e:\n    print('"+AgentFailed+"%s' % e)\n") + ")")
}

// LoadFailure is what Python said when a PythonTry command failed, ""
// when it did not.
func LoadFailure(r *mi.Result) string {
	_, why, failed := strings.Cut(r.Console(), AgentFailed)
	if !failed {
		return ""
	}
	if why = strings.TrimSpace(why); why == "" {
		why = "no reason given"
	}
	return why
}

// PyString returns s as a Python string literal: JSON's string syntax is
// Python's too.
func PyString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// LastLine returns the last non-empty line of console output.
func LastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// Python compiles agent.py at every read: 11-12 ms of a run's start in a
// gdb that has just started, against under 1 ms to load code compiled
// before (a gdb -batch script timing compile() and marshal.load()). So
// gdb's Python keeps the compiled code in the user's cache directory, as
// Python keeps its own in __pycache__ (agentload.py): one file per
// bundle of scripts (the agent's core, a backend's part) and Python
// version, named by the bundle, a hash of its scripts and Python's cache
// tag and release; writing one removes the bundle's files of other
// versions, so the directory holds what the installed snapctl uses. Where
// there is no usable cache directory, gdb compiles the scripts at every
// run as before.
//
//go:embed agentload.py
var agentLoadSource string

const agentLoadScript = "agentload.py"

// Script is one file of gdb's Python: its name in the run's private
// directory and its text.
type Script struct {
	Name, Source string
}

// coreBundle names the agent's core, agent.py, in the cache.
const coreBundle = "core"

var (
	cacheDirOnce sync.Once
	cacheDirPath string
)

// cacheDir is the directory that keeps the compiled agent in the user's
// cache directory ($XDG_CACHE_HOME/snapctl, by default ~/.cache/snapctl),
// "" when there is none: no home, a directory snapctl cannot make, or
// one that is not the user's alone (its code runs in gdb).
func cacheDir() string {
	cacheDirOnce.Do(func() {
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
		cacheDirPath = dir
	})
	return cacheDirPath
}

// cachePrefix is the prefix of bundle's compiled files in dir:
// agent-BUNDLE-HASH, the hash of its scripts' names and texts.
func cachePrefix(dir, bundle string, scripts []Script) string {
	h := sha256.New()
	for _, s := range scripts {
		h.Write([]byte(s.Name + "\x00" + s.Source + "\x00"))
	}
	return filepath.Join(dir, "agent-"+bundle+"-"+hex.EncodeToString(h.Sum(nil)[:8]))
}

// AgentRead is the Python that reads agent.py's definitions from script,
// which lies in a private directory: through agentload.py and the cache
// when there is one.
func AgentRead(script string) string {
	return readScripts(coreBundle, []string{script}, []Script{{AgentScript, AgentSource}})
}

// WriteAgent writes agent.py into dir, the run's private directory, and
// returns the Python that reads its definitions (AgentRead), as every gdb
// of a run reads them; a backend's part follows it (WriteScripts).
func WriteAgent(dir string) (string, error) {
	script := filepath.Join(dir, AgentScript)
	if err := os.WriteFile(script, []byte(AgentSource), 0o600); err != nil {
		return "", err
	}
	return AgentRead(script), nil
}

// readScripts is the Python that reads the files at paths, scripts'
// texts written in a private directory, in order into gdb's namespace
// (the agent's: a backend's part uses the core's names as its own).
func readScripts(bundle string, paths []string, scripts []Script) string {
	var compile strings.Builder
	for _, path := range paths {
		compile.WriteString("exec(compile(open(" + PyString(path) + ").read(), " + PyString(path) + ", 'exec'), globals())\n")
	}
	dir := cacheDir()
	if dir == "" {
		return compile.String()
	}
	loader := filepath.Join(filepath.Dir(paths[0]), agentLoadScript)
	if err := os.WriteFile(loader, []byte(agentLoadSource), 0o600); err != nil {
		return compile.String()
	}
	list := make([]string, len(paths))
	for i, path := range paths {
		list[i] = PyString(path)
	}
	return "exec(open(" + PyString(loader) + ").read())\n" +
		"for _snapctl_code in snapctl_agent_code([" + strings.Join(list, ", ") + "], " + PyString(cachePrefix(dir, bundle, scripts)) + "):\n" +
		"    exec(_snapctl_code, globals())\n"
}

// WriteScripts writes scripts into dir, the run's private directory,
// and returns the Python that reads them into gdb's namespace as bundle
// (see readScripts).
func WriteScripts(dir, bundle string, scripts []Script) (string, error) {
	paths := make([]string, len(scripts))
	for i, s := range scripts {
		paths[i] = filepath.Join(dir, s.Name)
		if err := os.WriteFile(paths[i], []byte(s.Source), 0o600); err != nil {
			return "", err
		}
	}
	return readScripts(bundle, paths, scripts), nil
}

// Returned reports whether rec is the stop of -exec-finish: the call
// Returned.
func Returned(rec *mi.Record) bool {
	r := rec.String("reason")
	return r == "function-finished" || r == "location-reached"
}

// BacktraceDepth caps the frames a stop records of the stopped thread. The
// reports use the first ones (the stop's frame, the first frame in the
// program's own code); every frame more is read from the target's stack
// through vgdb at every stop.
const BacktraceDepth = 32

// Debugger is the seam between the session and gdb: a *mi.Client in a real
// run, a recorded transcript in tests of the stop loop.
type Debugger interface {
	// Send runs one MI command; args are passed as they are, already
	// quoted with mi.Quote where needed.
	Send(ctx context.Context, cmd string, args ...string) (*mi.Result, error)
	// SendBatch runs several MI commands, written to gdb at once and run
	// in order, and returns every result and error by position.
	SendBatch(ctx context.Context, cmds []mi.Command) ([]*mi.Result, []error)
	// Events delivers async records (*stopped, =thread-created, ...).
	Events() <-chan *mi.Record
	// Done is closed when gdb has exited.
	Done() <-chan struct{}
	// Err says why gdb is gone, nil while it runs.
	Err() error
}

// Message returns gdb's words for a failed command: the msg of an
// ^error, or the error text.
func Message(err error) string {
	var me *mi.Error
	if errors.As(err, &me) {
		return me.Msg
	}
	return err.Error()
}

// FrameOf converts an MI frame tuple ({addr, func, file, fullname, line,
// from}) into a Frame.
func FrameOf(v *mi.Value) runjson.Frame {
	line, _ := strconv.Atoi(v.String("line"))
	return NewFrame(runjson.Frame{Function: v.String("func"), File: v.String("file"), Line: line,
		FullName: v.String("fullname"), Addr: v.String("addr"), From: v.String("from")})
}

// NewFrame is f, with the fields as gdb gives them, as run.json records
// it: the file's base name, as massif prints it, and "??" for a function
// gdb cannot name.
func NewFrame(f runjson.Frame) runjson.Frame {
	if f.File != "" {
		f.File = filepath.Base(f.File)
	}
	if f.Function == "" {
		f.Function = "??"
	}
	return f
}

// FramesOf converts the stack list of -stack-list-frames.
func FramesOf(list []*mi.Value) []runjson.Frame {
	out := make([]runjson.Frame, 0, len(list))
	for _, v := range list {
		out = append(out, FrameOf(v))
	}
	return out
}

// ThreadsOf converts the threads list of -thread-info.
func ThreadsOf(list []*mi.Value) []runjson.Thread {
	out := make([]runjson.Thread, 0, len(list))
	for _, v := range list {
		t := runjson.Thread{
			ID:       v.String("id"),
			TargetID: v.String("target-id"),
			State:    v.String("state"),
			Details:  v.String("details"),
		}
		if fv := v.Tuple("frame"); fv != nil {
			f := FrameOf(fv)
			t.Frame = &f
		}
		out = append(out, t)
	}
	return out
}

// ThreadsChanged compares the threads before and after the target was
// resumed by a stop's actions and names every thread other than self that
// ran: its frame or state changed, it is new, or it is gone.
func ThreadsChanged(self string, before, after []runjson.Thread) []string {
	old := make(map[string]runjson.Thread, len(before))
	for _, t := range before {
		old[t.ID] = t
	}
	var changed []string
	seen := make(map[string]bool, len(after))
	for _, t := range after {
		seen[t.ID] = true
		if t.ID == self {
			continue
		}
		o, ok := old[t.ID]
		switch {
		case !ok:
			changed = append(changed, describeThread(t)+": new")
		case o.State != t.State || o.Details != t.Details:
			changed = append(changed, describeThread(t)+": state changed")
		case framePC(o.Frame) != framePC(t.Frame):
			changed = append(changed, describeThread(t)+": frame changed")
		}
	}
	for _, t := range before {
		if !seen[t.ID] && t.ID != self {
			changed = append(changed, describeThread(t)+": exited")
		}
	}
	return changed
}

func describeThread(t runjson.Thread) string {
	if t.TargetID == "" {
		return t.ID
	}
	return t.ID + " (" + t.TargetID + ")"
}

func framePC(f *runjson.Frame) string {
	if f == nil {
		return ""
	}
	return f.Addr
}

// ReadsBacktraces reports whether any of the plan's stops reads a
// backtrace: threads other than none, or an around_call, whose stops read
// every thread.
func ReadsBacktraces(p *plan.Plan) bool {
	for _, bp := range p.Breakpoints {
		if bp.Threads != plan.ThreadsNone || bp.AroundCall {
			return true
		}
	}
	return false
}

// FrameArguments is gdb's print frame-arguments mode for a session:
// gdb's default, scalars, when a breakpoint has commands, so that bt and
// frame print what users expect; else none, which spares reading the
// arguments from the target at every stop. (With 1 KiB cache lines the
// arguments of a stop cost little: bench/stops.sh 300 measured 5.57 ms a
// stop with scalars against 5.53 with none, within its noise.)
func FrameArguments(plan *plan.Plan) string {
	for _, bp := range plan.Breakpoints {
		if len(bp.Commands) > 0 {
			return "scalars"
		}
	}
	return "none"
}

// InsertArgs are the -break-insert arguments of a breakpoint. Validation
// against the bare binary (live false) leaves out the ignore count, which
// only matters in the running target.
func InsertArgs(bp *plan.Breakpoint, live bool) []string {
	if live {
		// -f: a location in a library not loaded yet (valgrind stops
		// the target before the dynamic loader runs, and a plugin comes
		// with dlopen) is a pending breakpoint that gdb resolves when
		// the library loads. The check on the bare binary has ruled
		// out the locations that nothing defines.
		return append([]string{"-f"}, BreakInsertArgs(bp)...)
	}
	b := *bp
	b.Skip = 0
	return BreakInsertArgs(&b)
}

// BreakInsertArgs returns the arguments of the MI command -break-insert for
// b, each one MI word, already quoted where MI needs it, so that the
// command line is "-break-insert " + strings.Join(args, " "):
//
//	-i 5 -c "$_thread == 2 && (id % 10 == 0)" handle_request
//	"Scheduler::submit(int, char)"
//
// Skip becomes gdb's ignore count (-i). Thread becomes part of the
// condition ($_thread == N) rather than -p: the thread may not exist yet
// when the breakpoint is inserted, and gdb refuses -p for an unknown
// thread. Every, MaxHits and AroundCall are the stop loop's business and
// do not appear. A gdb explicit location ("-source leak.c -line 15")
// becomes MI's options for it (--source leak.c --line 15), since MI does
// not parse explicit locations in the location string; so does a function
// in single quotes (--function NAME, see plan.GdbLocation).
func BreakInsertArgs(b *plan.Breakpoint) []string {
	var args []string
	if b.Skip > 0 {
		args = append(args, "-i", strconv.Itoa(b.Skip))
	}
	if c := b.GdbCondition(); c != "" {
		args = append(args, "-c", mi.Word(c))
	}
	// The plan was checked: an explicit location reads, and so does the
	// one GdbLocation makes of a quoted function.
	loc := b.GdbLocation()
	if opts, err := plan.ExplicitLocation(loc); err == nil && opts != nil {
		for _, o := range opts {
			args = append(args, "--"+o.Name)
			if o.Value != "" {
				args = append(args, mi.Word(o.Value))
			}
		}
		return args
	}
	return append(args, mi.Word(loc))
}

// PendingResult reports whether gdb made -break-insert's breakpoint a
// pending one: no code location matches yet.
func PendingResult(r *mi.Result) bool {
	return r != nil && (r.String("bkpt.pending") != "" || r.String("bkpt.addr") == "<PENDING>")
}

// Running reports whether a thread of the target runs, as gdb sees it;
// true when gdb cannot say.
func Running(ctx context.Context, gdb Debugger) bool {
	r, err := Send(ctx, gdb, ThreadInfo())
	if err != nil {
		return true
	}
	for _, t := range r.List("threads") {
		if t.String("state") == "running" {
			return true
		}
	}
	return false
}

func HasFeature(r *mi.Result, name string) bool {
	for _, v := range r.List("features") {
		if v.String("") == name {
			return true
		}
	}
	return false
}

// LostTarget reports whether gdb's words mean that the connection to
// valgrind's gdbserver is gone.
func LostTarget(msg string) bool {
	return strings.Contains(msg, "Remote connection closed") ||
		strings.Contains(msg, "Remote communication error") ||
		strings.Contains(msg, "The program is not being run")
}

// RefusedRunning reports whether err is gdb refusing a command because the
// thread it would act on runs ("Cannot execute this command while the
// selected thread is running."): the answer to a resume after an
// interrupt whose stop did not come within Interrupt's wait, the target
// still running.
func RefusedRunning(err error) bool {
	var me *mi.Error
	return errors.As(err, &me) && strings.Contains(me.Msg, "while the selected thread is running")
}

// OwnStop reports whether rec is the stop an interrupt causes: a SIGINT or
// SIGTRAP, or a stop without a reason. Anything else (a breakpoint hit, a
// signal, the target's exit) happened before the interrupt took effect and
// must be handled as any stop.
func OwnStop(rec *mi.Record) bool {
	switch rec.String("reason") {
	case "":
		return true
	case "signal-received":
		sig := rec.String("signal-name")
		return sig == "SIGINT" || sig == "SIGTRAP"
	}
	return false
}

// ExitRecord reports whether rec says that the target has ended.
func ExitRecord(rec *mi.Record) bool {
	switch rec.String("reason") {
	case "exited-normally", "exited", "exited-signalled":
		return true
	}
	return false
}

func RecFrame(rec *mi.Record) *runjson.Frame {
	v := rec.Results.Tuple("frame")
	if v == nil {
		return nil
	}
	f := FrameOf(v)
	return &f
}

// FindThread returns the thread with gdb id id from threads, or a thread
// with only the id.
func FindThread(threads []runjson.Thread, id string) runjson.Thread {
	for _, t := range threads {
		if t.ID == id {
			t.Frame = nil // the stop's frame is recorded once
			return t
		}
	}
	return runjson.Thread{ID: id}
}
