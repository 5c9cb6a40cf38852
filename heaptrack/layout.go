package heaptrack

import (
	"debug/elf"
	"encoding/binary"
	"fmt"

	"github.com/snapctl/snapctl/internal/elfsym"
)

// Layout says where, in a build of heaptrack's preload (or inject)
// library, the state a cut reads lies: the offsets from the library's load
// address of its lock (a pthread mutex: int lock word at 0, owner TID at
// 8) and of the pointer to its output state, whose first fields are the
// line writer's fd (int at 0), the number of bytes buffered (uint32 at 4)
// and the buffer (pointer at 8), 4,096 bytes (PIPE_BUF) long.
type Layout struct {
	Lib  string // the library it was read from
	Lock uint64 // offset of the mutex every event is written under
	Data uint64 // offset of the pointer to the output state (nil when not recording)
	// Anchor is the value of the exported function the layout was read
	// from (layoutFunc): where it lies in a process, less Anchor, is the
	// library's load address.
	Anchor uint64
	// Span is how far from its load address the library's segments
	// reach: its code and data lie in [base, base+Span).
	Span uint64
}

// AgentLayout is the layout as gdb's agent takes it (the native backend's
// agent/heaptrack.py, record_sites): the library, how its load address
// is found (the runtime address of the function Anchor, less
// AnchorValue, as gdb resolves it), how far it reaches, and where the
// lock, the state pointer and the state's fields lie, so that the agent
// knows no offset of its own. The fields are read as the Layout's doc
// says: the lock word and owner as 32-bit ints, the state pointer and the
// buffer as 64-bit pointers, the fd as a 32-bit int, the bytes buffered
// as a 32-bit count of at most Capacity.
type AgentLayout struct {
	Lib         string `json:"lib"`
	Anchor      string `json:"anchor"`
	AnchorValue uint64 `json:"anchor_value"`
	Span        uint64 `json:"span"`
	Lock        uint64 `json:"lock"`
	LockOwner   uint64 `json:"lock_owner"`
	Data        uint64 `json:"data"`
	Fd          uint64 `json:"fd"`
	Size        uint64 `json:"size"`
	Buffer      uint64 `json:"buffer"`
	Capacity    uint64 `json:"capacity"`
}

// Agent is l as gdb's agent takes it.
func (l Layout) Agent() AgentLayout {
	return AgentLayout{Lib: l.Lib, Anchor: layoutFunc, AnchorValue: l.Anchor, Span: l.Span,
		Lock: l.Lock, LockOwner: offLockOwner, Data: l.Data,
		Fd: offFd, Size: offBufferSize, Buffer: offBuffer, Capacity: bufferCap}
}

// Offsets in the output state and the mutex, and the buffer's capacity.
const (
	offFd         = 0
	offBufferSize = 4
	offBuffer     = 8
	offStatm      = 16 // LockedData's /proc/self/statm descriptor, after the line writer
	offLockWord   = 0
	offLockOwner  = 8
	bufferCap     = 4096
)

// layoutFunc is the exported function whose code names both: it takes
// the lock (lea of the mutex into a register for pthread_mutex_lock),
// loads the state pointer (mov from a RIP-relative address into a
// register) and sets the module cache flag at offset 0x14 of the state.
const layoutFunc = "heaptrack_invalidate_module_cache"

// LayoutError says why a library's layout could not be read: a build
// snapctl does not know, whose stops cannot be cut exactly.
type LayoutError struct {
	Lib string
	Msg string
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("%s: %s; exact cuts need heaptrack 1.4's layout (Debian's libheaptrack)", e.Lib, e.Msg)
}

// ReadLayout reads the layout of a heaptrack library by decoding the
// x86-64 code of heaptrack_invalidate_module_cache: its first
// RIP-relative lea into .bss is the mutex, its first RIP-relative mov from
// .bss the state pointer, and a `movb $1, 0x14(reg)` must follow (the
// store that marks the module cache dirty), else the build is not the one
// this package knows.
func ReadLayout(lib string) (Layout, error) {
	f, err := elf.Open(lib)
	if err != nil {
		return Layout{}, fmt.Errorf("reading heaptrack library: %w", err)
	}
	defer f.Close()
	if f.Machine != elf.EM_X86_64 {
		return Layout{}, &LayoutError{Lib: lib, Msg: "not an x86-64 library"}
	}
	syms, err := elfsym.Read(f, elfsym.Dynamic)
	if err != nil {
		return Layout{}, &LayoutError{Lib: lib, Msg: err.Error()}
	}
	var fn elf.Symbol
	for _, s := range syms {
		if s.Name == layoutFunc {
			fn = s
		}
	}
	bss := f.Section(".bss")
	text := f.Section(".text")
	if fn.Value == 0 || fn.Size == 0 || bss == nil || text == nil {
		return Layout{}, &LayoutError{Lib: lib, Msg: "no " + layoutFunc + " or no .bss"}
	}
	code := make([]byte, fn.Size)
	if _, err := text.ReadAt(code, int64(fn.Value-text.Addr)); err != nil {
		return Layout{}, &LayoutError{Lib: lib, Msg: err.Error()}
	}
	inBss := func(a uint64) bool { return a >= bss.Addr && a < bss.Addr+bss.Size }
	l := Layout{Lib: lib, Anchor: fn.Value}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			l.Span = max(l.Span, p.Vaddr+p.Memsz)
		}
	}
	dirty := false
	for i := 0; i+7 <= len(code); i++ {
		// REX.W (optionally .R) 8D/8B with ModRM mod=00 rm=101: RIP-relative.
		rex, op, modrm := code[i], code[i+1], code[i+2]
		if (rex == 0x48 || rex == 0x4c) && (op == 0x8d || op == 0x8b) && modrm&0xc7 == 0x05 {
			disp := int32(binary.LittleEndian.Uint32(code[i+3:]))
			target := fn.Value + uint64(i+7) + uint64(int64(disp))
			switch {
			case op == 0x8d && l.Lock == 0 && inBss(target):
				l.Lock = target
			case op == 0x8b && l.Data == 0 && inBss(target):
				l.Data = target
			}
		}
		// C6 /0 ib with disp8: movb $1, 0x14(reg).
		if l.Data != 0 && code[i] == 0xc6 && code[i+1]&0xf8 == 0x40 && code[i+2] == 0x14 && code[i+3] == 0x01 {
			dirty = true
		}
	}
	if l.Lock == 0 || l.Data == 0 || !dirty {
		return Layout{}, &LayoutError{Lib: lib, Msg: "unknown code in " + layoutFunc}
	}
	return l, nil
}
