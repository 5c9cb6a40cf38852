package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/snapshots"
)

// showOptions are the flags of `snapctl show`.
type showOptions struct {
	format    string
	threshold float64
}

func newShowCmd() *cobra.Command {
	opts := &showOptions{}
	cmd := &cobra.Command{
		Use:   "show FILE[#N]",
		Short: "Print a massif file's snapshots and allocation trees, like ms_print",
		Long: `Show prints the totals of every snapshot of a massif file and, under each
detailed one, its allocation tree with the share and bytes of every line,
like ms_print but fast: it reads one snapshot at a time.

FILE#N shows only snapshot N, FILE#peak the peak snapshot; in an xtmemory
file FILE#curBk (or another event) shows that event's tree. FILE - reads
standard input; a FIFO or a shell's <(...) is read as it comes, and a
directory or a device is refused. Ctrl-C ends it wherever it is.`,
		Example: `  snapctl show massif.out.4242
  snapctl show --threshold 1 snapctl-runs/x/snapshots/0003-request-2.massif
  snapctl show --format json massif.out.4242#peak`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("show takes one massif file, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runShow(cmd.Context(), cmd.OutOrStdout(), cmd.InOrStdin(), args[0], opts)
		},
	}
	formatFlag(cmd, &opts.format, "output format", "text", "json")
	cmd.Flags().Float64Var(&opts.threshold, "threshold", 0, "fold tree lines below `PCT` percent of a snapshot's heap into one line (display only)")
	return cmd
}

func runShow(ctx context.Context, w io.Writer, stdin io.Reader, spec string, opts *showOptions) error {
	sopts := snapshots.ShowOptions{Format: opts.format, Threshold: opts.threshold}
	if !(sopts.Threshold >= 0 && sopts.Threshold <= 100) { // also NaN
		return usageError{fmt.Errorf("--threshold %g: want a percentage between 0 and 100", opts.threshold)}
	}
	path, sel := splitSpec(spec)
	in, name, closeIn, err := openMassif(ctx, path, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	if sel == "" {
		return snapshots.Show(w, snapshots.NewReader(in, name, snapshots.ReadOptions{}), sopts)
	}
	f, s, err := snapshots.ParseSelect(in, name, sel)
	if err != nil {
		return err
	}
	f.Snapshots = []*snapshots.Snapshot{s}
	return snapshots.RenderShow(w, f, sopts)
}

// openMassif opens a massif file, or standard input for "-", for the
// readers (show, diff, export): a regular file or a pipe, whose reads end
// once ctx does (SIGINT, SIGTERM, SIGHUP). A directory or a device is
// refused before anything is read. With stdin nil (diff), "-" is a file
// name like any other.
func openMassif(ctx context.Context, path string, stdin io.Reader) (r io.Reader, name string, closeFn func(), err error) {
	if path == "-" && stdin != nil {
		return fsutil.Stdin(ctx, stdin), "<stdin>", func() {}, nil
	}
	f, err := fsutil.Open(ctx, path, fsutil.ReadOptions{What: "massif file", Pipes: true})
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, "", nil, fmt.Errorf("massif file %s does not exist", path)
		}
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, "", nil, fmt.Errorf("opening massif file %s: %w", path, pe.Err)
		}
		return nil, "", nil, err
	}
	return f, path, func() { f.Close() }, nil
}
