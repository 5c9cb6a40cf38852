package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/snapctl/snapctl/internal/term"
	"github.com/snapctl/snapctl/snapshots"
)

// diffOptions are the flags of `snapctl diff`.
type diffOptions struct {
	format           string
	groupBy          string
	depth            int
	ignore           []string
	focus            []string
	library          []string
	noDefaultLibrary bool
	unchanged        bool
	top              int
	frames           int
	tree             bool
}

func newDiffCmd() *cobra.Command {
	opts := &diffOptions{}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two massif snapshots per allocation call site",
		Long: `Diff compares two heap snapshots and prints, per allocation call site, the
bytes before, after and the change, with the stack that reaches the site.

A call site is the first frame in your own code on the way out of the
allocator: allocations made through the C++ standard library or libc are
reported at the line that called into it, with the library frames shown
apart. --library adds patterns for more library code.

A and B are massif files: FILE#N picks snapshot N of a multi-snapshot file,
FILE#peak its peak, a bare FILE its last detailed snapshot.

Patterns (--ignore, --focus, --library) are globs in which only * is
special. They match a frame's function (with or without return type and
parameters), its file or file:line, or its object; prefix one with fn:,
file: or obj: to match only that. --ignore drops every allocation whose
stack has a matching frame; --focus keeps only those whose stack has one.`,
		Example: `  snapctl diff before.ms after.ms
  snapctl diff massif.out.4242#3 massif.out.4242#peak --group-by function
  snapctl diff a.ms b.ms --ignore _dl_allocate_tls --format markdown > diff.md
  snapctl diff a.ms b.ms --focus 'Scheduler::*' --format json`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return usageError{fmt.Errorf("diff takes two snapshots A and B, got %d arguments", len(args))}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			w := cmd.OutOrStdout()
			return runDiffCmd(cmd.Context(), w, args[0], args[1], opts, colorFor(w))
		},
	}
	f := cmd.Flags()
	formatFlag(cmd, &opts.format, "output format", "text", "markdown", "json")
	f.StringVar(&opts.groupBy, "group-by", "site", "rows by call `site`, function, or stack")
	f.IntVar(&opts.depth, "depth", 0, "with --group-by stack, the callers that tell stacks apart (0: all)")
	f.StringArrayVar(&opts.ignore, "ignore", nil, "drop allocations whose stack has a frame matching `PAT` (repeatable)")
	f.StringArrayVar(&opts.focus, "focus", nil, "keep only allocations whose stack has a frame matching `PAT` (repeatable)")
	f.StringArrayVar(&opts.library, "library", nil, "treat frames matching `PAT` as library code (repeatable)")
	f.BoolVar(&opts.noDefaultLibrary, "no-default-library", false, "do not treat the C++ standard library, libc wrappers and system paths as library code")
	f.BoolVar(&opts.unchanged, "unchanged", false, "list the sites whose bytes did not change too")
	f.IntVar(&opts.top, "top", 0, "show at most `N` sites, the largest changes (0: all)")
	f.IntVar(&opts.frames, "frames", 8, "show at most `N` callers per stack in text and markdown (0: all)")
	f.BoolVar(&opts.tree, "tree", false, "print the tree of signed deltas, frame by frame, instead of the sites (text only; --depth limits its depth)")
	enumFlag(cmd, "group-by", "site", "function", "stack")
	return cmd
}

// analysis turns the flags into the snapshots package's options.
func (o *diffOptions) analysis() (snapshots.Options, snapshots.Format, error) {
	format, err := snapshots.ParseFormat(o.format)
	if err != nil {
		return snapshots.Options{}, "", usageError{fmt.Errorf("--format: %w", err)}
	}
	group, err := snapshots.ParseGroupBy(o.groupBy)
	if err != nil {
		return snapshots.Options{}, "", usageError{fmt.Errorf("--group-by: %w", err)}
	}
	if o.tree && format != snapshots.FormatText {
		return snapshots.Options{}, "", usageError{fmt.Errorf("--tree prints text only, not %s", format)}
	}
	if o.depth < 0 || o.top < 0 || o.frames < 0 {
		return snapshots.Options{}, "", usageError{fmt.Errorf("--depth, --top and --frames take a count, not a negative number")}
	}
	return snapshots.Options{
		GroupBy:          group,
		Depth:            o.depth,
		Library:          o.library,
		NoDefaultLibrary: o.noDefaultLibrary,
		Ignore:           o.ignore,
		Focus:            o.focus,
		Unchanged:        o.unchanged,
	}, format, nil
}

func runDiffCmd(ctx context.Context, w io.Writer, specA, specB string, o *diffOptions, color bool) error {
	opts, format, err := o.analysis()
	if err != nil {
		return err
	}
	a, err := loadSnapshotSpec(ctx, specA)
	if err != nil {
		return err
	}
	b, err := loadSnapshotSpec(ctx, specB)
	if err != nil {
		return err
	}
	if o.tree {
		return snapshots.RenderDeltaTree(w, snapshots.DiffTree(a.snap.Tree, b.snap.Tree), snapshots.TreeOptions{
			Color: color, MaxDepth: o.depth, Library: o.library, NoDefaultLibrary: o.noDefaultLibrary,
		})
	}
	d, err := snapshots.DiffSnapshots(a.snap, b.snap, opts)
	if err != nil {
		return err
	}
	d.From, d.To = a.ref(), b.ref()
	return snapshots.RenderDiff(w, d, format, snapshots.RenderOptions{
		Color: color && format == snapshots.FormatText, MaxSites: o.top, MaxFrames: o.frames,
	})
}

// snapshotSpec is one side of a diff: the file as named and the snapshot
// picked from it.
type snapshotSpec struct {
	path string
	snap *snapshots.Snapshot
}

func (s snapshotSpec) ref() *snapshots.SnapshotRef {
	return &snapshots.SnapshotRef{File: s.path, Snapshot: s.snap.Index, HeapBytes: s.snap.HeapBytes}
}

// loadSnapshotSpec reads FILE, FILE#N or FILE#peak.
func loadSnapshotSpec(ctx context.Context, spec string) (snapshotSpec, error) {
	path, sel := splitSpec(spec)
	in, name, closeIn, err := openMassif(ctx, path, nil)
	if err != nil {
		return snapshotSpec{}, err
	}
	defer closeIn()
	f, err := snapshots.Parse(in, name)
	if err != nil {
		return snapshotSpec{}, err
	}
	s, err := f.Select(sel)
	if err != nil {
		return snapshotSpec{}, err
	}
	if err := f.MergeBlocks(s); err != nil {
		return snapshotSpec{}, err
	}
	if s.Tree == nil {
		return snapshotSpec{}, fmt.Errorf("%s: snapshot %d of %s has totals only; diff needs a detailed snapshot (run massif with --detailed-freq=1, or pick one with FILE#N)", spec, s.Index, path)
	}
	return snapshotSpec{path: path, snap: s}, nil
}

// colorFor reports whether output to w may be coloured: w is a terminal,
// not a dumb one, and NO_COLOR is not set to a non-empty value
// (https://no-color.org).
func colorFor(w io.Writer) bool { return term.Color(w) }
