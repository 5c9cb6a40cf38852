package mi_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/snapctl/snapctl/driver/mi"
)

// f and c build expected values tersely.
func f(name string, v *mi.Value) mi.Field { return mi.Field{Name: name, Value: v} }
func c(s string) *mi.Value                { return mi.Const(s) }

// equalValues compares values by their MI text, which is unambiguous.
func equalValues(t *testing.T, want, got *mi.Value) {
	t.Helper()
	if diff := cmp.Diff(want.MI(), got.MI()); diff != "" {
		t.Errorf("value mismatch (-want +got):\n%s", diff)
	}
}

func TestParseRecordKinds(t *testing.T) {
	tests := []struct {
		line  string
		typ   mi.Type
		token string
		class string
		res   *mi.Value // results; nil for none
		text  string
	}{
		{line: `^done`, typ: mi.TypeResult, class: "done", res: mi.NewTuple()},
		{line: `42^running`, typ: mi.TypeResult, token: "42", class: "running", res: mi.NewTuple()},
		{line: `7^connected`, typ: mi.TypeResult, token: "7", class: "connected", res: mi.NewTuple()},
		{line: `20^exit`, typ: mi.TypeResult, token: "20", class: "exit", res: mi.NewTuple()},
		{line: `4^error,msg="Undefined MI command: no-such-command",code="undefined-command"`,
			typ: mi.TypeResult, token: "4", class: "error",
			res: mi.NewTuple(f("msg", c("Undefined MI command: no-such-command")), f("code", c("undefined-command")))},
		{line: `*running,thread-id="all"`, typ: mi.TypeExec, class: "running", res: mi.NewTuple(f("thread-id", c("all")))},
		{line: `*stopped,reason="exited-normally"`, typ: mi.TypeExec, class: "stopped", res: mi.NewTuple(f("reason", c("exited-normally")))},
		{line: `+download,section=".text"`, typ: mi.TypeStatus, class: "download", res: mi.NewTuple(f("section", c(".text")))},
		{line: `=thread-created,id="2",group-id="i1"`, typ: mi.TypeNotify, class: "thread-created",
			res: mi.NewTuple(f("id", c("2")), f("group-id", c("i1")))},
		{line: `12=thread-exited,id="2"`, typ: mi.TypeNotify, token: "12", class: "thread-exited", res: mi.NewTuple(f("id", c("2")))},
		{line: `~"[New Thread 15129]\n"`, typ: mi.TypeConsole, text: "[New Thread 15129]\n"},
		{line: `@"error: cannot take snapshot before execution has started\n"`, typ: mi.TypeTarget,
			text: "error: cannot take snapshot before execution has started\n"},
		{line: `&"warning: remote target does not support file transfer\n"`, typ: mi.TypeLog,
			text: "warning: remote target does not support file transfer\n"},
		{line: `~""`, typ: mi.TypeConsole, text: ""},
		{line: `(gdb) `, typ: mi.TypePrompt},
		{line: `(gdb)`, typ: mi.TypePrompt},
		{line: "^done\r", typ: mi.TypeResult, class: "done", res: mi.NewTuple()},
	}
	for _, tt := range tests {
		t.Run(tt.line, func(t *testing.T) {
			r, err := mi.ParseRecord([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseRecord: %v", err)
			}
			if r.Type != tt.typ || r.Token != tt.token || r.Class != tt.class || r.Text != tt.text {
				t.Errorf("got type %v token %q class %q text %q, want %v %q %q %q",
					r.Type, r.Token, r.Class, r.Text, tt.typ, tt.token, tt.class, tt.text)
			}
			if (tt.res == nil) != (r.Results == nil) {
				t.Fatalf("results = %v, want %v", r.Results, tt.res)
			}
			if tt.res != nil {
				equalValues(t, tt.res, r.Results)
			}
		})
	}
}

func TestParseValues(t *testing.T) {
	tests := []struct {
		name string
		line string
		want *mi.Value
	}{
		{"empty tuple and list", `^done,a={},b=[]`,
			mi.NewTuple(f("a", mi.NewTuple()), f("b", mi.NewList()))},
		{"list of values", `^done,thread-groups=["i1","i2"]`,
			mi.NewTuple(f("thread-groups", mi.NewList(f("", c("i1")), f("", c("i2")))))},
		{"list of results", `^done,stack=[frame={level="0"},frame={level="1"}]`,
			mi.NewTuple(f("stack", mi.NewList(
				f("frame", mi.NewTuple(f("level", c("0")))),
				f("frame", mi.NewTuple(f("level", c("1")))))))},
		{"list of tuples", `^done,args=[{name="n",value="16"}]`,
			mi.NewTuple(f("args", mi.NewList(f("", mi.NewTuple(f("name", c("n")), f("value", c("16")))))))},
		{"nested", `*stopped,frame={args=[{name="x",value="{a = 1}"}],line="15"}`,
			mi.NewTuple(f("frame", mi.NewTuple(
				f("args", mi.NewList(f("", mi.NewTuple(f("name", c("x")), f("value", c("{a = 1}")))))),
				f("line", c("15")))))},
		{"mi2 multi-location", `^done,bkpt={number="1",addr="<MULTIPLE>"},{number="1.1"},{number="1.2"}`,
			mi.NewTuple(
				f("bkpt", mi.NewTuple(f("number", c("1")), f("addr", c("<MULTIPLE>")))),
				f("bkpt", mi.NewTuple(f("number", c("1.1")))),
				f("bkpt", mi.NewTuple(f("number", c("1.2")))))},
		{"mi2 multi-location in a list", `^done,body=[bkpt={number="1"},{number="1.1"}]`,
			mi.NewTuple(f("body", mi.NewList(
				f("bkpt", mi.NewTuple(f("number", c("1")))),
				f("", mi.NewTuple(f("number", c("1.1")))))))},
		{"mi3 multi-location", `^done,bkpt={number="1",locations=[{number="1.1"},{number="1.2"}]}`,
			mi.NewTuple(f("bkpt", mi.NewTuple(f("number", c("1")), f("locations", mi.NewList(
				f("", mi.NewTuple(f("number", c("1.1")))),
				f("", mi.NewTuple(f("number", c("1.2")))))))))},
		{"value with brackets in a string", `^done,value="[{\"a\"}]"`,
			mi.NewTuple(f("value", c(`[{"a"}]`)))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := mi.ParseRecord([]byte(tt.line))
			if err != nil {
				t.Fatalf("ParseRecord: %v", err)
			}
			equalValues(t, tt.want, r.Results)
		})
	}
}

func TestParseCString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`caf\303\251`, "café"},
		{`\e[1mbold\e[0m`, "\x1b[1mbold\x1b[0m"},
		{`\"q\" tab\there\n`, "\"q\" tab\there\n"},
		{`\\`, `\`},
		{`\a\b\f\v\r`, "\a\b\f\v\r"},
		{`\'\?`, `'?`},
		{`\0`, "\x00"},
		{`\12x`, "\nx"},
		{`\1234`, "S4"}, // three octal digits at most
		{`\x41\x4a\x4Z`, "AJ\x04Z"},
		{`\xq`, "xq"},
		{`\q`, "q"}, // unknown escape keeps the character
		{`\400`, "\x00"},
		{"raw \xc3\xa9 utf-8", "raw é utf-8"},
	}
	for _, tt := range tests {
		r, err := mi.ParseRecord([]byte(`~"` + tt.in + `"`))
		if err != nil {
			t.Errorf("%s: %v", tt.in, err)
			continue
		}
		if r.Text != tt.want {
			t.Errorf("%s: got %q, want %q", tt.in, r.Text, tt.want)
		}
	}
}

func TestParseMalformed(t *testing.T) {
	lines := []string{
		``,
		`^`,
		`123`,
		`^done,`,
		`^done,a`,
		`^done,a=`,
		`^done,a=b`,
		`^done,="x"`,
		`^done a="x"`,
		`^done,a="x`,
		`^done,a="x\`,
		`^done,a={b="1"`,
		`^done,a={b="1",`,
		`^done,a=[`,
		`^done,a=["1" "2"]`,
		`^done,a={"1"}`,
		`^done,"x"`,
		`^done,a="x"}`,
		`~"text" trailing`,
		`~text`,
		`12~"x"`,
		`!weird`,
		`kept 4 blocks`,
		`(gdb) x`,
		`^done,a={b=[}]`,
	}
	for _, line := range lines {
		r, err := mi.ParseRecord([]byte(line))
		if err == nil {
			t.Errorf("%q: parsed as %+v, want an error", line, r)
			continue
		}
		var se *mi.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("%q: error %v is not a *SyntaxError", line, err)
		}
	}
}

func TestParseDeepNesting(t *testing.T) {
	line := "^done,a=" + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
	if _, err := mi.ParseRecord([]byte(line)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("got %v, want a nesting error", err)
	}
	ok := "^done,a=" + strings.Repeat("{b=", 100) + `"x"` + strings.Repeat("}", 100)
	r, err := mi.ParseRecord([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.String("a" + strings.Repeat(".b", 100)); got != "x" {
		t.Errorf("deep value = %q", got)
	}
}

// hugeRecord returns a result record of at least n bytes: a list of
// frames, as -stack-list-frames prints for a deep stack.
func hugeRecord(n int) (line string, frames int) {
	var b strings.Builder
	b.WriteString(`^done,stack=[`)
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`frame={level="`)
		b.WriteString(itoa(i))
		b.WriteString(`",func="recurse",file="deep.c",line="7",args=[{name="s",value="\"`)
		b.WriteString(strings.Repeat("ab", 50))
		b.WriteString(`\""}]}`)
		frames++
	}
	b.WriteByte(']')
	return b.String(), frames
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

func TestQuoteRoundTrip(t *testing.T) {
	var all strings.Builder
	for i := 0; i < 256; i++ {
		all.WriteByte(byte(i))
	}
	for _, s := range []string{
		"", "plain", `n == 100`, `say "hi"`, `back\slash`, "tab\tnew\nline\r",
		"| vgdb --vgdb-prefix=/tmp/x y/vgdb --pid=42", "café", "\x1b[0m\x7f", all.String(),
	} {
		q := mi.Quote(s)
		if strings.ContainsAny(q, "\n\r") {
			t.Errorf("Quote(%q) = %q holds a line break", s, q)
		}
		r, err := mi.ParseRecord([]byte("~" + q))
		if err != nil {
			t.Errorf("Quote(%q) = %q does not parse: %v", s, q, err)
			continue
		}
		if r.Text != s {
			t.Errorf("Quote(%q) = %q reads back as %q", s, q, r.Text)
		}
	}
	if got, want := mi.Quote(`a "b" \c`+"\n"), `"a \"b\" \\c\n"`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
	if got, want := mi.Quote("\x01\x1b\x7f"), `"\001\033\177"`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}

func TestRecordMIRoundTrip(t *testing.T) {
	for _, line := range []string{
		`12^done,bkpt={number="1",locations=[{number="1.1"},{number="1.2"}]},x=[]`,
		`*stopped,reason="breakpoint-hit",frame={args=[{name="n",value="16"}]},thread-id="1"`,
		`~"caf\303\251\n"`,
		`(gdb)`,
		`=thread-group-added,id="i1"`,
	} {
		r, err := mi.ParseRecord([]byte(line))
		if err != nil {
			t.Fatal(err)
		}
		again, err := mi.ParseRecord([]byte(r.MI()))
		if err != nil {
			t.Fatalf("%q: MI() = %q does not parse: %v", line, r.MI(), err)
		}
		if diff := cmp.Diff(r.MI(), again.MI()); diff != "" {
			t.Errorf("round trip of %q (-first +second):\n%s", line, diff)
		}
	}
	r, _ := mi.ParseRecord([]byte(`~"caf\303\251\n"`))
	if got, want := r.MI(), "~\"caf\xc3\xa9\\n\""; got != want {
		t.Errorf("MI() = %q, want %q", got, want)
	}
}

// Word leaves a word that MI's argument splitter reads back unchanged as
// it is, and quotes the rest as Quote does.
func TestWord(t *testing.T) {
	for in, want := range map[string]string{
		"main":                   "main",
		"leak.c:15":              "leak.c:15",
		"*0x401136":              "*0x401136",
		"":                       `""`,
		"id % 10 == 0":           `"id % 10 == 0"`,
		`s == "a\b"`:             `"s == \"a\\b\""`,
		"'ns::f(int, char)'":     `"'ns::f(int, char)'"`,
		"a\tb\nc\r":              `"a\tb\nc\r"`,
		"x\x01\x7f":              `"x\001\177"`,
		"größe":                  "größe",
		"Scheduler::submit(int)": "Scheduler::submit(int)",
	} {
		if got := mi.Word(in); got != want {
			t.Errorf("Word(%q) = %s, want %s", in, got, want)
		}
	}
}
