package mi_test

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/internal/testenv"
)

// Queued counts the records the reader queued for Events and those the
// pump put in the channel: both records gdb printed are counted as
// queued once read, and as sent once they are in Events.
func TestQueuedCountsEvents(t *testing.T) {
	t.Parallel()
	out, gdbOut := io.Pipe()
	c := mi.NewClient(out, io.Discard, nil)
	defer c.CloseNow()
	fmt.Fprint(gdbOut, "*stopped,frame={func=\"_start\"},thread-id=\"1\"\n=thread-created,id=\"1\",group-id=\"i1\"\n")
	testenv.WaitUntil(t, "the reader to queue both records", 10*time.Second, time.Millisecond, func() bool {
		pushed, _ := c.Queued()
		return pushed == 2
	})
	for _, want := range []string{"stopped", "thread-created"} {
		if rec := <-c.Events(); rec.Class != want {
			t.Fatalf("record %+v, want %s", rec, want)
		}
	}
	if pushed, sent := c.Queued(); pushed != 2 || sent != 2 {
		t.Errorf("queued %d, sent %d; want 2 and 2", pushed, sent)
	}
	gdbOut.Close()
}
