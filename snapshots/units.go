package snapshots

import (
	"fmt"
	"strconv"
)

// FormatBytes prints a byte count in binary units: "0 B", "24 B", "1.2 KiB",
// "3.0 MiB". Negative counts keep their sign.
func FormatBytes(n int64) string {
	sign := ""
	u := n
	if n < 0 {
		sign = "-"
		u = -n
	}
	if u < 1024 {
		return sign + strconv.FormatInt(u, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(u) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return fmt.Sprintf("%s%.1f %s", sign, v, units[i])
}

// FormatDelta is FormatBytes with an explicit sign: "+24 B", "-1.0 KiB", "0 B".
func FormatDelta(n int64) string {
	if n > 0 {
		return "+" + FormatBytes(n)
	}
	return FormatBytes(n)
}
