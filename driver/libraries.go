package driver

import (
	"context"
	"fmt"
	"time"

	"github.com/snapctl/snapctl/driver/mi"
	"github.com/snapctl/snapctl/preflight"
)

// loadLibrarySymbols has the gdb that checks locations read the symbols of
// the libraries binary links, so that a location in one of them resolves
// before the program runs. Best effort: a library gdb cannot read is left
// out.
func loadLibrarySymbols(ctx context.Context, c *mi.Client, binary, dir string, env []string, timeout time.Duration) {
	for _, lib := range preflight.LinkedLibraries(ctx, binary, dir, env) {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		c.Send(cctx, "-interpreter-exec", "console", mi.Quote(fmt.Sprintf("add-symbol-file %q", lib)))
		cancel()
	}
}
