package testenv

import (
	"testing"
	"time"
)

func TestLoadFactorOf(t *testing.T) {
	for _, tc := range []struct {
		loadavg string
		cpus    int
		want    float64
	}{
		{"0.52 0.58 0.59 1/1123 4567", 2, 1},        // quiet: never below 1
		{"24.00 20.00 12.00 3/1123 4567", 2, 12},    // the last minute's average
		{"1.00 1.00 1.00 31/1123 4567", 2, 15},      // load come this instant: 30 runnable besides the reader
		{"400.00 300.00 200.00 2/1123 4567", 2, 20}, // at most 20
		{"", 2, 1},                      // unreadable: as quiet
		{"6.00 5.00 4.00 1/10 1", 0, 6}, // no processor count: as one
	} {
		if got := loadFactorOf(tc.loadavg, tc.cpus); got != tc.want {
			t.Errorf("loadFactorOf(%q, %d) = %v, want %v", tc.loadavg, tc.cpus, got, tc.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	if d := NewDeadline(time.Hour); d.Passed() {
		t.Errorf("a deadline of an hour passed at once")
	}
	d := NewDeadline(time.Millisecond)
	time.Sleep(time.Duration(maxPatience+1) * time.Millisecond)
	if !d.Passed() {
		t.Errorf("a deadline of 1 ms not passed after %v, patience %v", d.Waited(), Patience())
	}
	if s := Scaled(time.Second); s < time.Second || s > maxPatience*time.Second {
		t.Errorf("Scaled(1s) = %v", s)
	}
}
