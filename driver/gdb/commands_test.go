package gdb

import (
	"testing"
	"time"
)

func TestRemoteTimeout(t *testing.T) {
	for _, tt := range []struct {
		deadlines []time.Duration
		want      string
	}{
		{[]time.Duration{30 * time.Second, 30 * time.Second}, "31"},
		{[]time.Duration{30 * time.Second, 2 * time.Minute}, "121"},
		{[]time.Duration{1500 * time.Millisecond, 100 * time.Millisecond}, "3"},
	} {
		cmd := RemoteTimeout(tt.deadlines...)
		if got := cmd.Args; len(got) != 2 || got[0] != "remotetimeout" || got[1] != tt.want {
			t.Errorf("RemoteTimeout(%v) = %s %q, want remotetimeout %s", tt.deadlines, cmd.Name, got, tt.want)
		}
	}
}
