package plan

import "testing"

// A function in single quotes goes to gdb as an explicit location; every
// other location, quoted files and half-quoted text included, as written.
func TestGdbLocation(t *testing.T) {
	for _, tt := range []struct{ loc, want string }{
		{"'ns::Box<long>::operator<<(int)'", "-function ns::Box<long>::operator<<(int)"},
		{"'ns::f(int, char)'", "-function ns::f(int, char)"},
		{"' spaced '", "-function spaced"},
		{"handle_request", "handle_request"},
		{"ns::Box<long>::operator<<(int)", "ns::Box<long>::operator<<(int)"},
		{"'leak.c':12", "'leak.c':12"},
		{"'my file.c'::f", "'my file.c'::f"},
		{"'a'b'", "'a'b'"},
		{"''", "''"},
		{"' '", "' '"},
		{"'", "'"},
		{"'-source a.c'", "'-source a.c'"},
		{"-function f", "-function f"},
		{"*0x401000", "*0x401000"},
	} {
		if got := (Breakpoint{Location: tt.loc}).GdbLocation(); got != tt.want {
			t.Errorf("GdbLocation(%q) = %q, want %q", tt.loc, got, tt.want)
		}
	}
}
