package plan

import (
	"os"
	"testing"

	"github.com/snapctl/snapctl/internal/testenv"
)

// TestMain checks that the tests that start gdb and valgrind leave none
// behind.
func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }
