// Package plan reads and validates a snapctl plan: the target, the
// breakpoints and which of their hits take a measurement, the workload and
// each backend's settings, with file:line:column errors.
package plan
