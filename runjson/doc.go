// Package runjson is run.json, the record of one run: its schema's types,
// shared by the driver that writes it and every command that reads it.
package runjson
