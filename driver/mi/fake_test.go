package mi_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
)

// transcript is a recorded session of testdata/mi: what gdb printed before
// the first command, then each command with what gdb printed until the
// next one.
type transcript struct {
	head  []string
	steps []step
}

type step struct {
	cmd string   // as written, with its token
	out []string // gdb's output lines until the next command
}

// stops reports whether the step's output holds a *stopped record.
func (s step) stops() bool {
	for _, l := range s.out {
		if strings.HasPrefix(l, "*stopped") {
			return true
		}
	}
	return false
}

// command strips the token from the command line.
func (s step) command() string { return strings.TrimLeft(s.cmd, "0123456789") }

func loadTranscript(t *testing.T, name string) *transcript {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(transcriptDir, name))
	if err != nil {
		t.Fatal(err)
	}
	tr := &transcript{}
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		switch {
		case strings.HasPrefix(line, "# "), strings.HasPrefix(line, "stderr: "):
		case strings.HasPrefix(line, "-> "):
			tr.steps = append(tr.steps, step{cmd: strings.TrimPrefix(line, "-> ")})
		case len(tr.steps) == 0:
			tr.head = append(tr.head, line)
		default:
			s := &tr.steps[len(tr.steps)-1]
			s.out = append(s.out, line)
		}
	}
	return tr
}

// fakeGDB is the gdb end of a client made by NewClient.
type fakeGDB struct {
	cmds *bufio.Reader  // what the client writes
	out  *io.PipeWriter // what the client reads
	in   *io.PipeReader
}

// newFake returns a client wired to a fake gdb. The cleanup closes both.
func newFake(t *testing.T) (*mi.Client, *fakeGDB) {
	t.Helper()
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	c := mi.NewClient(outR, inW, nil)
	fk := &fakeGDB{cmds: bufio.NewReader(inR), out: outW, in: inR}
	t.Cleanup(func() {
		outW.Close()
		inR.Close()
		c.Close()
	})
	return c, fk
}

// command returns the next command line the client wrote.
func (fk *fakeGDB) command() (string, error) {
	line, err := fk.cmds.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

func (fk *fakeGDB) print(lines ...string) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	_, err := fk.out.Write(b.Bytes())
	return err
}

// replay plays a transcript as gdb: it prints the head, then answers each
// command the client sends with the recorded output, after checking that
// the command is the recorded one. It ends gdb's output after the last
// step.
func (fk *fakeGDB) replay(t *testing.T, tr *transcript) <-chan error {
	errc := make(chan error, 1)
	go func() {
		defer fk.out.Close()
		if err := fk.print(tr.head...); err != nil {
			errc <- err
			return
		}
		for _, s := range tr.steps {
			got, err := fk.command()
			if err != nil {
				errc <- err
				return
			}
			if got != s.cmd {
				errc <- errors.New("client sent " + got + ", transcript has " + s.cmd)
				return
			}
			if err := fk.print(s.out...); err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}()
	return errc
}

// session is the outcome of replaying a transcript through the client.
type session struct {
	results []*mi.Result // per step; nil where the step failed
	errs    []error      // per step
	events  []*mi.Record // every event, in order
}

// eventsOf returns the events of one type and class.
func (s *session) eventsOf(typ mi.Type, class string) []*mi.Record {
	var out []*mi.Record
	for _, e := range s.events {
		if e.Type == typ && e.Class == class {
			out = append(out, e)
		}
	}
	return out
}

// replaySession sends the transcript's commands through a client talking to
// a fake gdb that answers with the recorded output. As the recorder did, it
// waits for the target to stop after a step whose output holds *stopped.
func replaySession(t *testing.T, name string) *session {
	t.Helper()
	tr := loadTranscript(t, name)
	c, fk := newFake(t)
	errc := fk.replay(t, tr)
	s := &session{}
	for _, st := range tr.steps {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		r, err := c.Send(ctx, st.command())
		cancel()
		s.results = append(s.results, r)
		s.errs = append(s.errs, err)
		if st.stops() {
			for e := range c.Events() {
				s.events = append(s.events, e)
				if e.Type == mi.TypeExec && e.Class == "stopped" {
					break
				}
			}
		}
	}
	if err := <-errc; err != nil {
		t.Fatalf("replay: %v", err)
	}
	<-c.Done()
	for e := range c.Events() {
		s.events = append(s.events, e)
	}
	return s
}

// stepIndex finds the step whose command starts with prefix.
func stepIndex(t *testing.T, name, prefix string, nth int) int {
	t.Helper()
	tr := loadTranscript(t, name)
	for i, st := range tr.steps {
		if strings.HasPrefix(st.command(), prefix) {
			if nth == 0 {
				return i
			}
			nth--
		}
	}
	t.Fatalf("%s has no step %q", name, prefix)
	return -1
}
