package preflight

import (
	"bufio"
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// LinkedLibraries lists the shared libraries binary loads at start-up, as
// the dynamic loader resolves them (ldd, from glibc's libc-bin) in the
// program's working directory dir ("" for ours): absolute paths, the
// loader and the vDSO left out. Nil when ldd is missing or the binary is
// static.
func LinkedLibraries(ctx context.Context, binary, dir string, env []string) []string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ldd", binary)
	cmd.Dir, cmd.Env = dir, env
	cmd.WaitDelay = 10 * time.Second // see ToolVersion
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	base, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	return parseLdd(out, base)
}

// parseLdd reads ldd's lines: "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6
// (0x...)", "./libkeep.so (0x...)" for a library linked by a path (taken
// relative to dir, where the loader would look), and the loader and vDSO,
// which are left out.
func parseLdd(out []byte, dir string) []string {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if _, after, ok := strings.Cut(line, "=>"); ok {
			line = strings.TrimSpace(after)
		}
		path, _, _ := strings.Cut(line, " (")
		path = strings.TrimSpace(path)
		if !strings.Contains(path, "/") || strings.Contains(filepath.Base(path), "ld-linux") {
			continue // the vDSO, "not found", the loader
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(dir, path)
		}
		libs = append(libs, path)
	}
	return libs
}

// SystemLibrary reports whether lib is one of the system's (under /lib or
// /usr/lib), whose debug info comes from -dbg packages or debuginfod rather
// than from the program's build.
func SystemLibrary(lib string) bool {
	for _, dir := range []string{"/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/lib32/", "/lib32/"} {
		if strings.HasPrefix(lib, dir) {
			return true
		}
	}
	return false
}
