package mi_test

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"

	"github.com/snapctl/snapctl/driver/mi"
)

// countingWriter counts the writes that reach gdb's input.
type countingWriter struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
	return c.w.Write(p)
}

func (c *countingWriter) writes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

func TestSendBatch(t *testing.T) {
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	cw := &countingWriter{w: inW}
	c := mi.NewClient(outR, cw, nil)
	t.Cleanup(func() {
		outW.Close()
		inR.Close()
		c.Close()
	})
	fk := &fakeGDB{cmds: bufio.NewReader(inR), out: outW, in: inR}

	var got []string
	done := answer(t, func() error {
		for range 3 {
			line, err := fk.command()
			if err != nil {
				return err
			}
			got = append(got, line)
		}
		return fk.print(`1^done,threads=[]`, `(gdb) `,
			`@"error: cannot take snapshot\n"`, `2^done`, `(gdb) `,
			`3^error,msg="The program is not being run."`, `(gdb) `)
	})
	res, errs := c.SendBatch(quickCtx(t), []mi.Command{
		{Name: "-thread-info"},
		{Name: "-interpreter-exec", Args: []string{"console", mi.Quote("monitor detailed_snapshot /tmp/s.massif")}},
		{Name: "-exec-continue"},
	})
	<-done
	want := []string{`1-thread-info`, `2-interpreter-exec console "monitor detailed_snapshot /tmp/s.massif"`, `3-exec-continue`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("gdb read %q, want %q", got, want)
	}
	if n := cw.writes(); n != 1 {
		t.Errorf("the batch took %d writes, want 1", n)
	}
	if errs[0] != nil || res[0] == nil || res[0].Class != "done" {
		t.Errorf("first = %v, %v; want ^done", res[0], errs[0])
	}
	// Stream records belong to the command whose result follows them.
	if errs[1] != nil || res[1].Target() != "error: cannot take snapshot\n" {
		t.Errorf("second = %+v, %v; want the target stream", res[1], errs[1])
	}
	var me *mi.Error
	if res[2] != nil || !errors.As(errs[2], &me) || me.Msg != "The program is not being run." {
		t.Errorf("third = %v, %v; want an *mi.Error", res[2], errs[2])
	}
}

func TestSendBatchSendsNothingWhenOneCommandIsInvalid(t *testing.T) {
	outR, outW := io.Pipe()
	inR, inW := io.Pipe()
	cw := &countingWriter{w: inW}
	c := mi.NewClient(outR, cw, nil)
	t.Cleanup(func() {
		outW.Close()
		inR.Close()
		c.Close()
	})
	_, errs := c.SendBatch(quickCtx(t), []mi.Command{{Name: "-thread-info"}, {Name: "-gdb-set", Args: []string{"a\nb"}}})
	if errs[0] == nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "line break") {
		t.Errorf("errs = %v, want both failed, the second for its line break", errs)
	}
	if n := cw.writes(); n != 0 {
		t.Errorf("%d writes reached gdb, want none", n)
	}
}
