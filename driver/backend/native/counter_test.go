package native

import "testing"

func TestStraight(t *testing.T) {
	for inst, want := range map[string]bool{
		"push   %rbp":                 true,
		"mov    %rsp,%rbp":            true,
		"sub    $0x10,%rsp":           true,
		"mov    %rdi,-0x8(%rbp)":      true,
		"endbr64":                     true,
		"call   0x1030 <malloc@plt>":  false,
		"jmp    0x1149 <hot+16>":      false,
		"je     0x1150":               false,
		"ret":                         false,
		"lock addl $0x1,0x2e8f(%rip)": false,
		"notrack jmp *%rax":           false,
		"":                            false,
		"syscall":                     false,
		"mov    %fs:0x28,%rax":        true,
	} {
		if got := straight(inst); got != want {
			t.Errorf("straight(%q) = %v, want %v", inst, got, want)
		}
	}
}

func TestTarget(t *testing.T) {
	for inst, want := range map[string]uint64{
		"jne    0x555555555150 <hot+23>": 0x555555555150,
		"call   0x1030 <malloc@plt>":     0x1030,
		"jmp    *%rax":                   0,
		"mov    %rsp,%rbp":               0,
	} {
		if got, ok := target(inst); got != want || ok != (want != 0) {
			t.Errorf("target(%q) = %#x, %v; want %#x", inst, got, ok, want)
		}
	}
}
