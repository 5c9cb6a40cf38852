package gdb

import (
	"os"
	"runtime"
	"strconv"
	"strings"
)

// maxStretch bounds loadStretch, as 20 times a quiet machine's wait: the
// native backend's bound too.
const maxStretch = 20

// loadStretch is how many times longer than on a quiet machine a wait of
// gdb's may take now: the load average of the last minute per processor,
// from 1 to maxStretch, the rule of every other wait of the product (the
// native backend's patience). A variable for the tests.
var loadStretch = func() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	return stretchOf(string(data), runtime.NumCPU())
}

// stretchOf is loadStretch for a /proc/loadavg of loadavg on cpus
// processors.
func stretchOf(loadavg string, cpus int) float64 {
	f := strings.Fields(loadavg)
	if len(f) == 0 {
		return 1
	}
	load, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return 1
	}
	return min(max(1, load/float64(max(cpus, 1))), maxStretch)
}
