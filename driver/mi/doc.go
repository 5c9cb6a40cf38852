// Package mi is a GDB/MI client.
package mi
