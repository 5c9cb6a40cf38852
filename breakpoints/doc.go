// Package breakpoints reads and validates a snapctl plan and translates its breakpoints into GDB/MI commands.
package breakpoints
