package snapshots

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
)

// gzipMagic starts every gzip stream (RFC 1952); a massif file starts with
// text ("desc:", or "#" and "snapshot=" from heaptrack's exporter).
var gzipMagic = []byte{0x1f, 0x8b}

// unzip replaces the reader's input with its decompressed stream when it
// starts with gzip's magic bytes. Concatenated gzip members are read as one
// file, as gunzip does.
func (r *Reader) unzip() error {
	head, _ := r.br.Peek(len(gzipMagic))
	if !bytes.Equal(head, gzipMagic) {
		return nil
	}
	zr, err := gzip.NewReader(r.br)
	if err != nil {
		return fmt.Errorf("reading massif file %s: %w", r.name, err)
	}
	r.br = bufio.NewReaderSize(zr, r.br.Size())
	return nil
}
