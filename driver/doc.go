// Package driver runs one snapctl profiling session: valgrind's massif with its gdbserver, gdb attached through vgdb, the stop loop and the teardown of every child process.
package driver
