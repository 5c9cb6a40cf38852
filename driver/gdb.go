package driver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/runjson"
)

// debugger is the seam between the session and gdb: a *mi.Client in a real
// run, a recorded transcript in tests of the stop loop.
type debugger interface {
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

// miMessage returns gdb's words for a failed command: the msg of an
// ^error, or the error text.
func miMessage(err error) string {
	var me *mi.Error
	if errors.As(err, &me) {
		return me.Msg
	}
	return err.Error()
}

// insertError is the error of inserting st's breakpoint into the running
// target: gdb's refusal is the plan's (exit 3, at the location's line);
// anything else, such as gdb dying meanwhile, is not.
func insertError(st *bpState, err error) error {
	var me *mi.Error
	if errors.As(err, &me) {
		return st.bp.LocationError("gdb cannot insert %q in the running target: %s", st.bp.Location, me.Msg)
	}
	return fmt.Errorf("inserting breakpoint %q: %w", st.bp.Name, err)
}

// frameOf converts an MI frame tuple ({addr, func, file, fullname, line,
// from}) into a Frame.
func frameOf(v *mi.Value) runjson.Frame {
	line, _ := strconv.Atoi(v.String("line"))
	return newFrame(runjson.Frame{Function: v.String("func"), File: v.String("file"), Line: line,
		FullName: v.String("fullname"), Addr: v.String("addr"), From: v.String("from")})
}

// newFrame is f, with the fields as gdb gives them, as run.json records
// it: the file's base name, as massif prints it, and "??" for a function
// gdb cannot name.
func newFrame(f runjson.Frame) runjson.Frame {
	if f.File != "" {
		f.File = filepath.Base(f.File)
	}
	if f.Function == "" {
		f.Function = "??"
	}
	return f
}

// framesOf converts the stack list of -stack-list-frames.
func framesOf(list []*mi.Value) []runjson.Frame {
	out := make([]runjson.Frame, 0, len(list))
	for _, v := range list {
		out = append(out, frameOf(v))
	}
	return out
}

// threadsOf converts the threads list of -thread-info.
func threadsOf(list []*mi.Value) []runjson.Thread {
	out := make([]runjson.Thread, 0, len(list))
	for _, v := range list {
		t := runjson.Thread{
			ID:       v.String("id"),
			TargetID: v.String("target-id"),
			State:    v.String("state"),
			Details:  v.String("details"),
		}
		if fv := v.Tuple("frame"); fv != nil {
			f := frameOf(fv)
			t.Frame = &f
		}
		out = append(out, t)
	}
	return out
}

// threadsChanged compares the threads before and after the target was
// resumed by a stop's actions and names every thread other than self that
// ran: its frame or state changed, it is new, or it is gone.
func threadsChanged(self string, before, after []runjson.Thread) []string {
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
