package uprobes

import (
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// memberOffset agrees with cilium/ebpf's decoded kernel spec on every
// named member of structs with and without bitfields.
func TestMemberOffsetAgreesWithDecodedSpec(t *testing.T) {
	if _, err := os.Stat(kernelBTF); err != nil {
		t.Skipf("this kernel has no BTF: %v", err)
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(kernelBTF)
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, name := range []string{"task_struct", "sk_buff", "mm_struct", "signal_struct"} {
		var s *btf.Struct
		if err := spec.TypeByName(name, &s); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, m := range s.Members {
			if m.Name == "" || m.BitfieldSize != 0 {
				continue
			}
			got, err := findMember(raw, name, m.Name)
			if want := int64(m.Offset.Bytes()); err != nil || got != want {
				t.Errorf("%s.%s at %d (%v), want %d", name, m.Name, got, err, want)
			}
			checked++
		}
	}
	if checked < 100 {
		t.Errorf("compared %d members, want the four structs' hundreds", checked)
	}
	Available() // sets blockedAt, once per process
	if off, _ := memberOffset(kernelBTF, "task_struct", "blocked"); blockedAt != off || off < 0 {
		t.Errorf("the counter's offset of task_struct.blocked is %d, the file's %d", blockedAt, off)
	}
}

// A file that is not whole BTF, or lacks the struct or the member, is an
// error, never an offset.
func TestMemberOffsetRefuses(t *testing.T) {
	if _, err := os.Stat(kernelBTF); err != nil {
		t.Skipf("this kernel has no BTF: %v", err)
	}
	raw, err := os.ReadFile(kernelBTF)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	hdr, typeOff, typeLen := le.Uint32(raw[4:]), le.Uint32(raw[8:]), le.Uint32(raw[12:])
	badMagic := append([]byte{0xeb, 0x9f}, raw[2:]...) // big-endian BTF
	// The first type's kind one BTF does not have (yet).
	unknown := append([]byte(nil), raw...)
	info := hdr + typeOff + 4
	le.PutUint32(unknown[info:], le.Uint32(raw[info:])|0x1f<<24)
	short := raw[:hdr+typeOff+typeLen/2]
	for _, c := range []struct {
		name, member string
		raw          []byte
		want         string
	}{
		{"task_struct", "blocked", raw[:10], "too short"},
		{"task_struct", "blocked", badMagic, "not little-endian BTF"},
		{"task_struct", "blocked", short, "past the end"},
		{"snapctl_none", "blocked", raw, "no struct snapctl_none"},
		{"task_struct", "snapctl_none", raw, "struct task_struct has no member snapctl_none"},
		{"task_struct", "blocked", unknown, "BTF kind 31, newer than snapctl, at byte 0"},
	} {
		off, err := findMember(c.raw, c.name, c.member)
		if err == nil || off != -1 || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s.%s in %d bytes: %d, %v; want -1 and an error saying %q", c.name, c.member, len(c.raw), off, err, c.want)
		}
	}
}
