package preflight

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Options says where the tools are and which program will run.
type Options struct {
	// Gdb is the gdb to use (--gdb); empty looks up "gdb" on PATH.
	Gdb string
	// Valgrind is the valgrind to use (--valgrind); empty looks up
	// "valgrind" on PATH. vgdb is looked for next to it, then on PATH.
	Valgrind string
	// Binary is the program to profile; empty skips the binary checks.
	Binary string
	// NoValgrind skips valgrind and vgdb: the native backend runs the
	// program under gdb alone.
	NoValgrind bool
	// GdbVersion, when set, gives the first line of gdb's version from
	// a gdb the caller started: no gdb --version runs, unless it gives
	// "". Check calls it after its other checks, which a gdb still
	// starting then overlaps.
	GdbVersion func() string
	// Env, when not nil, is the environment the tools' --version run
	// with: the session's, so that every process a run starts has it.
	Env []string
}

// Environment is what Check found: the tools a session runs and what
// it should warn the user about.
type Environment struct {
	Gdb, Valgrind, Vgdb string // absolute paths

	GdbVersion, ValgrindVersion Version

	// Binary describes Options.Binary; nil when none was given.
	Binary *BinaryInfo
	// Ptrace says whether vgdb may ptrace the target.
	Ptrace Ptrace
	// Warnings are problems that do not stop a session: no debug info,
	// restricted ptrace.
	Warnings []Finding
}

// Tool returns the absolute path of the tool named name (gdb, valgrind,
// vgdb) as Check found it, "" for another name or one not checked.
func (e *Environment) Tool(name string) string {
	switch name {
	case "gdb":
		return e.Gdb
	case "valgrind":
		return e.Valgrind
	case "vgdb":
		return e.Vgdb
	}
	return ""
}

// Check checks, before anything starts, that gdb, valgrind and vgdb
// are present and recent enough, that the binary can be profiled and
// whether ptrace is permitted. Errors are *MissingToolError (for every
// missing tool at once, joined) or *BinaryError; warnings are returned in
// Environment.Warnings.
func Check(ctx context.Context, opts Options) (*Environment, error) {
	env := &Environment{Ptrace: CheckPtrace()}
	var errs []error

	var err error
	gdbFound := true
	if env.Gdb, err = FindTool("gdb", opts.Gdb); err != nil {
		errs = append(errs, err)
		gdbFound = false
	}
	if opts.NoValgrind {
		// Nothing to look for.
	} else if env.Valgrind, err = FindTool("valgrind", opts.Valgrind); err != nil {
		errs = append(errs, err)
	} else {
		if env.ValgrindVersion, err = toolVersion(ctx, "valgrind", env.Valgrind, opts.Env); err != nil {
			errs = append(errs, err)
		}
		if env.Vgdb, err = FindVgdb(env.Valgrind); err != nil {
			errs = append(errs, err)
		}
	}
	if opts.Binary != "" {
		info, err := InspectBinary(opts.Binary)
		if err != nil {
			errs = append(errs, err)
		} else {
			env.Binary = info
			env.Warnings = append(env.Warnings, info.Warnings...)
		}
	}
	if gdbFound {
		// gdb's errors come first, as the tools are named.
		line := ""
		if opts.GdbVersion != nil {
			line = opts.GdbVersion()
		}
		if line != "" {
			env.GdbVersion, err = parseVersion("gdb", env.Gdb, line)
		} else {
			env.GdbVersion, err = toolVersion(ctx, "gdb", env.Gdb, opts.Env)
		}
		if err != nil {
			errs = append([]error{err}, errs...)
		}
	}
	// What restricted ptrace costs is vgdb's: gdb starts the native
	// backend's program itself, and an attach that ptrace refuses fails
	// with its own message.
	if f, ok := env.Ptrace.Finding(); ok && !opts.NoValgrind {
		env.Warnings = append(env.Warnings, f)
	}
	if len(errs) > 0 {
		return env, errors.Join(errs...)
	}
	return env, nil
}

// packages names the Debian package that installs each tool.
var packages = map[string]string{
	"gdb":      "gdb",
	"valgrind": "valgrind",
	"vgdb":     "valgrind",
}

// MissingToolError reports a tool that is absent or cannot be used.
type MissingToolError struct {
	Tool    string // "gdb", "valgrind" or "vgdb"
	Package string // the Debian package that installs it
	Path    string // the path that was tried, when one was given
	Reason  string // what is wrong: "not found on PATH", "too old: ..."
	Err     error  // the underlying error, if any
}

func (e *MissingToolError) Error() string {
	return fmt.Sprintf("%s %s; install it with: sudo apt-get install %s", e.Tool, e.Reason, e.Package)
}

// Unwrap returns the underlying error.
func (e *MissingToolError) Unwrap() error { return e.Err }

// FindTool returns the absolute path of tool ("gdb" or "valgrind"): path
// when given (as --gdb or --valgrind), else the tool on PATH. It fails with
// a *MissingToolError.
func FindTool(tool, path string) (string, error) {
	missing := func(reason string, err error) error {
		return &MissingToolError{Tool: tool, Package: packages[tool], Path: path, Reason: reason, Err: err}
	}
	if path == "" {
		p, err := exec.LookPath(tool)
		if err != nil {
			return "", missing("not found on PATH", err)
		}
		path = p
	} else if !strings.ContainsRune(path, '/') {
		// --gdb gdb-multiarch: a name, looked up on PATH.
		p, err := exec.LookPath(path)
		if err != nil {
			return "", missing(fmt.Sprintf("%q not found on PATH", path), err)
		}
		path = p
	}
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", missing(fmt.Sprintf("not found at %s", path), err)
	case err != nil:
		return "", missing(fmt.Sprintf("cannot be used at %s: %v", path, err), err)
	case st.IsDir():
		return "", missing(fmt.Sprintf("not found at %s: it is a directory", path), nil)
	case st.Mode().Perm()&0o111 == 0:
		return "", missing(fmt.Sprintf("at %s is not executable", path), nil)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", missing(fmt.Sprintf("cannot be used at %s: %v", path, err), err)
	}
	return abs, nil
}

// FindVgdb returns vgdb's absolute path: next to valgrind (also next to
// the file valgrind's path links to), else on PATH. vgdb belongs to the
// valgrind it talks to, so the one beside it wins.
func FindVgdb(valgrind string) (string, error) {
	dirs := []string{filepath.Dir(valgrind)}
	if real, err := filepath.EvalSymlinks(valgrind); err == nil && filepath.Dir(real) != dirs[0] {
		dirs = append(dirs, filepath.Dir(real))
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, "vgdb")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath("vgdb"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs, nil
		}
	}
	return "", &MissingToolError{
		Tool:    "vgdb",
		Package: packages["vgdb"],
		Reason:  fmt.Sprintf("not found next to %s nor on PATH (it comes with valgrind)", valgrind),
	}
}

// Version is a tool's version as it prints it.
type Version struct {
	Text         string // the first line of --version, e.g. "GNU gdb (Debian 13.1-3) 13.1"
	Major, Minor int    // 0 when the text holds no version number
}

func (v Version) String() string { return v.Text }

// Minimum versions snapctl works with: GDB/MI 3 came with gdb 9; massif's
// xtmemory monitor command and --xtree-memory with valgrind 3.13.
var minVersions = map[string][2]int{
	"gdb":      {9, 0},
	"valgrind": {3, 13},
}

var (
	gdbVersionRE      = regexp.MustCompile(`^GNU gdb.*\s(\d+)\.(\d+)`)
	valgrindVersionRE = regexp.MustCompile(`^valgrind-(\d+)\.(\d+)`)
)

// ToolVersion runs `path --version` and parses the first line. A tool that
// cannot run or is older than snapctl supports gives a *MissingToolError.
func ToolVersion(ctx context.Context, tool, path string) (Version, error) {
	return toolVersion(ctx, tool, path, nil)
}

// toolVersion is ToolVersion with the tool's environment (nil: snapctl's).
func toolVersion(ctx context.Context, tool, path string, environ []string) (Version, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = environ
	// The tool has exited by the time this counts; what is left is the
	// copy of its output, which a loaded machine (load average 40 on two
	// cores) did not finish within a second: "valgrind does not run".
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil {
		return Version{}, &MissingToolError{Tool: tool, Package: packages[tool], Path: path,
			Reason: fmt.Sprintf("at %s does not run (%s --version: %v)", path, tool, err), Err: err}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return parseVersion(tool, path, first)
}

// parseVersion reads the first line of a tool's --version, as
// ToolVersion does.
func parseVersion(tool, path, first string) (Version, error) {
	v := Version{Text: strings.TrimSpace(first)}
	re := gdbVersionRE
	if tool == "valgrind" {
		re = valgrindVersionRE
	}
	m := re.FindStringSubmatch(v.Text)
	if m == nil {
		return v, &MissingToolError{Tool: tool, Package: packages[tool], Path: path,
			Reason: fmt.Sprintf("at %s does not look like %s: --version printed %q", path, tool, v.Text)}
	}
	v.Major, _ = strconv.Atoi(m[1])
	v.Minor, _ = strconv.Atoi(m[2])
	if lo, ok := minVersions[tool]; ok && (v.Major < lo[0] || v.Major == lo[0] && v.Minor < lo[1]) {
		return v, &MissingToolError{Tool: tool, Package: packages[tool], Path: path,
			Reason: fmt.Sprintf("%d.%d at %s is too old: snapctl needs %d.%d or later", v.Major, v.Minor, path, lo[0], lo[1])}
	}
	return v, nil
}
