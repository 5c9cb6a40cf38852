// Package gdb is the run's gdb once started: GDB/MI commands with their
// deadlines, what gdb announces, interrupts, the thread cache,
// scheduler-locking, the gdb started during the checks (Early), and the
// agent (agent.py) that takes stops inside gdb.
package gdb
