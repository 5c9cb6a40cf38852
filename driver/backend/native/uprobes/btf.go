package uprobes

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// kernelBTF is where the running kernel describes its own types.
const kernelBTF = "/sys/kernel/btf/vmlinux"

// memberOffset reads, from the BTF file at path, the byte offset of
// member in the struct named structName.
//
// It walks the type section once and decodes nothing but the names it
// compares: one offset is all the counter needs, where a decoded
// kernel spec (cilium/ebpf's btf.LoadKernelSpec) indexes and inflates
// the kernel's 100,000-odd types, some 190 ms of a race-built snapctl's
// start and a spec kept for the life of the process (docs/facts.md,
// fact 154).
func memberOffset(path, structName, member string) (int64, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return -1, err
	}
	off, err := findMember(raw, structName, member)
	if err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	return off, nil
}

// BTF's layout (the kernel's Documentation/bpf/btf.rst): a header, then
// a type section of records (a 12-byte head and a tail whose size the
// kind and vlen give) and a string section the names point into.
const (
	btfMagic    = 0xeb9f
	btfHeadSize = 24 // magic, version, flags, hdr_len, type_off, type_len, str_off, str_len
	typeHead    = 12 // name_off, info, size or type

	kindInt       = 1
	kindPtr       = 2
	kindArray     = 3
	kindStruct    = 4
	kindUnion     = 5
	kindEnum      = 6
	kindFwd       = 7
	kindTypedef   = 8
	kindVolatile  = 9
	kindConst     = 10
	kindRestrict  = 11
	kindFunc      = 12
	kindFuncProto = 13
	kindVar       = 14
	kindDatasec   = 15
	kindFloat     = 16
	kindDeclTag   = 17
	kindTypeTag   = 18
	kindEnum64    = 19
)

// findMember is memberOffset on the file's bytes.
func findMember(raw []byte, structName, member string) (int64, error) {
	if len(raw) < btfHeadSize {
		return -1, errors.New("not BTF: too short")
	}
	le := binary.LittleEndian
	if le.Uint16(raw) != btfMagic {
		return -1, errors.New("not little-endian BTF")
	}
	hdrLen := uint64(le.Uint32(raw[4:]))
	typeOff, typeLen := uint64(le.Uint32(raw[8:])), uint64(le.Uint32(raw[12:]))
	strOff, strLen := uint64(le.Uint32(raw[16:])), uint64(le.Uint32(raw[20:]))
	if hdrLen+typeOff+typeLen > uint64(len(raw)) || hdrLen+strOff+strLen > uint64(len(raw)) {
		return -1, errors.New("BTF sections past the end of the file")
	}
	types := raw[hdrLen+typeOff : hdrLen+typeOff+typeLen]
	strs := raw[hdrLen+strOff : hdrLen+strOff+strLen]
	name := func(off uint32) []byte {
		if uint64(off) >= uint64(len(strs)) {
			return nil
		}
		s := strs[off:]
		if end := bytes.IndexByte(s, 0); end >= 0 {
			return s[:end]
		}
		return s
	}
	want, wantMember := []byte(structName), []byte(member)
	for p := 0; p+typeHead <= len(types); {
		nameOff, info := le.Uint32(types[p:]), le.Uint32(types[p+4:])
		kind, vlen, bitfields := (info>>24)&0x1f, int(info&0xffff), info>>31 == 1
		var tail int
		switch kind {
		case kindInt, kindVar, kindDeclTag:
			tail = 4
		case kindArray:
			tail = 12
		case kindStruct, kindUnion, kindDatasec, kindEnum64:
			tail = 12 * vlen
		case kindEnum, kindFuncProto:
			tail = 8 * vlen
		case kindPtr, kindFwd, kindTypedef, kindVolatile, kindConst, kindRestrict, kindFunc, kindFloat, kindTypeTag:
		default:
			return -1, fmt.Errorf("BTF kind %d, newer than snapctl, at byte %d of the types", kind, p)
		}
		next := p + typeHead + tail
		if next > len(types) {
			return -1, errors.New("BTF type section cut short")
		}
		if kind == kindStruct && bytes.Equal(name(nameOff), want) {
			for m := p + typeHead; m < next; m += 12 {
				if !bytes.Equal(name(le.Uint32(types[m:])), wantMember) {
					continue
				}
				bits := le.Uint32(types[m+8:])
				if bitfields {
					bits &= 0xffffff // the high byte is the bitfield's size
				}
				return int64(bits / 8), nil
			}
			return -1, fmt.Errorf("struct %s has no member %s", structName, member)
		}
		p = next
	}
	return -1, fmt.Errorf("no struct %s", structName)
}
