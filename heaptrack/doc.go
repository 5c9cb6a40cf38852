// Package heaptrack measures a program's heap per call site at native speed:
// it reads the event stream of heaptrack's preload library through
// heaptrack_interpret as it comes, replays allocations and frees into live
// bytes and blocks per allocation stack, and cuts the stream exactly where
// the program stopped under gdb, giving at each stop the same per-site
// snapshot (snapshots.Snapshot) that massif's xtmemory gives.
//
// The pipeline, for a launched program:
//
//	libheaptrack_preload.so --FIFO--> Recorder (forwards, counts bytes) --pipe--> heaptrack_interpret --pipe--> Recorder (replays)
//
// The preload library (LD_PRELOAD, DUMP_HEAPTRACK_OUTPUT=FIFO) writes its
// raw events (`+ size trace ptr`, `- ptr`, `t ip parent`, `m module ...`)
// into a 4,096-byte buffer that it writes out only when full, and the
// interpreter, which symbolizes instruction pointers and numbers
// allocations (`a size trace`, `+ index`, `- index`, `s string`, `i ip
// ...`), buffers its output the same way. Neither flushes at a stop. A cut
// (gdb's agent, at a stop, with every thread stopped) therefore reads the
// library's unflushed buffer out of the stopped process's memory
// (/proc/PID/mem, no inferior call) and writes it into the FIFO after a
// mark (FIFOMark); the Recorder forwards it to the interpreter ahead of
// time, follows it with a marker line that the interpreter passes through
// unchanged and enough filler lines to make it write the marker out, and
// later drops the same bytes when the library flushes them into the FIFO.
// Where the lock and buffer live is found once per library build by
// decoding the exported heaptrack_invalidate_module_cache (Layout), and
// handed to gdb's agent as it is (Layout.Agent): this package is the one
// owner of that layout.
package heaptrack
