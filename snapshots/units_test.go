package snapshots

import "testing"

func TestFormatBytes(t *testing.T) {
	for _, tc := range []struct {
		n          int64
		abs, delta string
	}{
		{0, "0 B", "0 B"},
		{24, "24 B", "+24 B"},
		{-24, "-24 B", "-24 B"},
		{1023, "1023 B", "+1023 B"},
		{1024, "1.0 KiB", "+1.0 KiB"},
		{1229, "1.2 KiB", "+1.2 KiB"},
		{-3 << 20, "-3.0 MiB", "-3.0 MiB"},
		{5 << 30, "5.0 GiB", "+5.0 GiB"},
	} {
		if got := FormatBytes(tc.n); got != tc.abs {
			t.Errorf("FormatBytes(%d) = %q, want %q", tc.n, got, tc.abs)
		}
		if got := FormatDelta(tc.n); got != tc.delta {
			t.Errorf("FormatDelta(%d) = %q, want %q", tc.n, got, tc.delta)
		}
	}
}
