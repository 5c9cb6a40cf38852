// Package elfsym reads what snapctl needs of an ELF file's symbols: its
// symbol tables, which of their symbols are functions the file defines,
// and its GNU build ID. It is the one reader of them on the Go side.
package elfsym

import (
	"debug/elf"
	"errors"
	"fmt"
)

// Tables are the symbol tables to read.
type Tables uint8

const (
	// Static is .symtab, which a stripped file has not.
	Static Tables = 1 << iota
	// Dynamic is .dynsym, the symbols the dynamic linker sees.
	Dynamic
)

// Read returns the symbols of f's tables, .symtab's first. A table f
// lacks adds none; elf.ErrNoSymbols says that it has none of them. A
// table that cannot be read is an error, but the other's symbols are
// still returned with it.
func Read(f *elf.File, tables Tables) ([]elf.Symbol, error) {
	var out []elf.Symbol
	var errs []error
	found := false
	for _, t := range []struct {
		table Tables
		read  func() ([]elf.Symbol, error)
	}{{Static, f.Symbols}, {Dynamic, f.DynamicSymbols}} {
		if tables&t.table == 0 {
			continue
		}
		syms, err := t.read()
		if errors.Is(err, elf.ErrNoSymbols) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		found = true
		out = append(out, syms...)
	}
	if len(errs) > 0 {
		return out, errors.Join(errs...)
	}
	if !found {
		return nil, elf.ErrNoSymbols
	}
	return out, nil
}

// Open reads the symbols of the ELF file at path (Read).
func Open(path string, tables Tables) ([]elf.Symbol, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	syms, err := Read(f, tables)
	if err != nil {
		return syms, fmt.Errorf("%s: %w", path, err)
	}
	return syms, nil
}

// Value is the value of the symbol name in the tables of the ELF file at
// path (the last one so named, as the dynamic linker's lookup of a
// library's own symbol finds it): its offset from the file's load
// address in a shared library.
func Value(path string, tables Tables, name string) (uint64, error) {
	syms, err := Open(path, tables)
	if err != nil && len(syms) == 0 {
		return 0, err
	}
	for i := len(syms) - 1; i >= 0; i-- {
		if syms[i].Name == name {
			return syms[i].Value, nil
		}
	}
	return 0, fmt.Errorf("%s has no symbol %s", path, name)
}

// Defines reports whether s is a function its file defines (not one it
// imports).
func Defines(s elf.Symbol) bool {
	return elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF
}

// BuildID is f's GNU build ID in hex (its NT_GNU_BUILD_ID note), "" when
// it has none.
func BuildID(f *elf.File) string {
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		for len(data) >= 12 {
			order := f.ByteOrder
			nameSz, descSz, typ := uint64(order.Uint32(data)), uint64(order.Uint32(data[4:])), order.Uint32(data[8:])
			name, desc := (nameSz+3)&^3, (descSz+3)&^3
			if uint64(len(data)) < 12+name+desc {
				break
			}
			if typ == 3 && nameSz == 4 && string(data[12:15]) == "GNU" {
				return fmt.Sprintf("%x", data[12+name:12+name+descSz])
			}
			data = data[12+name+desc:]
		}
	}
	return ""
}
