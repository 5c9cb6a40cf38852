package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/internal/fsutil"
	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/snapshots"
)

// exportOptions are the flags of `snapctl export`.
type exportOptions struct {
	format string
	output string
	lines  bool
}

func newExportCmd() *cobra.Command {
	opts := &exportOptions{}
	cmd := &cobra.Command{
		Use:   "export --format pprof|folded FILE[#N] -o OUT",
		Short: "Convert a massif snapshot to a pprof profile or folded stacks",
		Long: `Export converts one snapshot of a massif file for the viewers people already
use: --format pprof writes a gzipped profile.proto (sample type inuse_space)
for go tool pprof, including -diff_base between two exports and its flame
graph; --format folded writes folded stacks ("main;handle_request;make_payload
1000") for flamegraph.pl and speedscope.

FILE picks the last detailed snapshot, FILE#N snapshot N, FILE#peak the peak.
An xtmemory .ms file exports every event it has as a sample type
(inuse_space, inuse_objects, alloc_space, ...). -o - writes to standard
output, except a pprof profile when standard output is a terminal.`,
		Example: `  snapctl export --format pprof massif.out.4242#peak -o peak.pb.gz
  go tool pprof -http=: -diff_base a.pb.gz b.pb.gz
  snapctl export --format folded massif.out.4242 -o - | flamegraph.pl > heap.svg`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("export takes one massif file, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runExport(cmd.Context(), cmd.OutOrStdout(), cmd.InOrStdin(), args[0], opts)
		},
	}
	formatFlag(cmd, &opts.format, "output format", "pprof", "folded")
	cmd.Flags().StringVarP(&opts.output, "output", "o", "-", "write to `OUT`; - is standard output")
	cmd.Flags().BoolVar(&opts.lines, "lines", false, "folded: name frames with their file:line")
	return cmd
}

func runExport(ctx context.Context, stdout io.Writer, stdin io.Reader, spec string, opts *exportOptions) error {
	var render func(w io.Writer, f *snapshots.File, s *snapshots.Snapshot) error
	switch opts.format {
	case "pprof":
		render = snapshots.RenderPprof
	case "folded":
		render = func(w io.Writer, _ *snapshots.File, s *snapshots.Snapshot) error {
			return snapshots.RenderFolded(w, s, snapshots.FoldedOptions{Lines: opts.lines})
		}
	default:
		panic("snapctl: export has no renderer for " + opts.format) // formatFlag took it
	}
	// As gzip does: compressed bytes on a terminal help no one and can
	// upset it.
	if opts.output == "-" && opts.format == "pprof" && term.IsTerminal(stdout) {
		return usageError{errors.New("not writing a gzipped pprof profile to a terminal: give -o FILE, or redirect standard output")}
	}
	path, sel := splitSpec(spec)
	in, name, closeIn, err := openMassif(ctx, path, stdin)
	if err != nil {
		return err
	}
	defer closeIn()
	f, s, err := snapshots.ParseSelect(in, name, sel)
	if err != nil {
		return err
	}
	if s.Tree == nil {
		return fmt.Errorf("massif file %s: snapshot %d has totals only (heap_tree=empty); pick a detailed one", name, s.Index)
	}
	if opts.output == "-" {
		bw := bufio.NewWriter(stdout)
		if err := render(bw, f, s); err != nil {
			return err
		}
		return bw.Flush()
	}
	// A regular file is replaced atomically, so a failed export never
	// leaves half a file; a FIFO, a device or a symlink's target is
	// written through.
	return fsutil.WriteFile(opts.output, 0o644, func(w io.Writer) error { return render(w, f, s) })
}
