package gdb

import (
	"os"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMain runs the tests as every package's do (testenv.Main): their
// processes checked, the race runtime's exit without its sleep.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
