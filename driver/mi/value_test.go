package mi_test

import (
	"testing"

	"github.com/snapctl/snapctl/driver/mi"
)

// stopLine is the *stopped record of a breakpoint hit in thread 2 under
// vgdb (testdata/mi/vgdb.mi).
const stopLine = `*stopped,reason="breakpoint-hit",disp="keep",bkptno="2",frame={addr="0x00000000001091a4",func="grow",args=[{name="n",value="100"}],file="/work/main/driver/mi/testdata/prog.c",fullname="/work/main/driver/mi/testdata/prog.c",line="15",arch="i386:x86-64"},thread-id="2",stopped-threads="all"`

func mustParse(t *testing.T, line string) *mi.Record {
	t.Helper()
	r, err := mi.ParseRecord([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestValuePaths(t *testing.T) {
	r := mustParse(t, stopLine)
	for path, want := range map[string]string{
		"reason":             "breakpoint-hit",
		"frame.func":         "grow",
		"frame.line":         "15",
		"frame.args.0.name":  "n",
		"frame.args.0.value": "100",
		"thread-id":          "2",
		"frame.args.1.name":  "", // no such element
		"frame.nosuch":       "",
		"frame":              "", // a tuple, not a constant
		"reason.more":        "",
		"":                   "",
	} {
		if got := r.String(path); got != want {
			t.Errorf("String(%q) = %q, want %q", path, got, want)
		}
	}
	if n, err := r.Int("thread-id"); err != nil || n != 2 {
		t.Errorf("Int(thread-id) = %d, %v", n, err)
	}
	if n, err := r.Int("frame.line"); err != nil || n != 15 {
		t.Errorf("Int(frame.line) = %d, %v", n, err)
	}
	if addr, err := r.Results.Uint64("frame.addr"); err != nil || addr != 0x1091a4 {
		t.Errorf("Uint64(frame.addr) = %#x, %v", addr, err)
	}
	if _, err := r.Int("reason"); err == nil {
		t.Error("Int(reason) succeeded on a non-number")
	}
	if _, err := r.Int("nosuch"); err == nil {
		t.Error("Int(nosuch) succeeded on a missing field")
	}
	if _, ok := r.Results.Lookup("frame.func"); !ok {
		t.Error("Lookup(frame.func) not found")
	}
	if _, ok := r.Results.Lookup("frame.nosuch"); ok {
		t.Error("Lookup(frame.nosuch) found")
	}
	if fr := r.Results.Tuple("frame"); fr.String("file") != "/work/main/driver/mi/testdata/prog.c" {
		t.Errorf("Tuple(frame) = %v", fr.MI())
	}
	if r.Results.Tuple("reason") != nil || r.Results.Tuple("frame.args") != nil {
		t.Error("Tuple returned a non-tuple")
	}
	args := r.Results.List("frame.args")
	if len(args) != 1 || args[0].String("value") != "100" {
		t.Errorf("List(frame.args) = %v", args)
	}
	if r.Results.List("frame") != nil {
		t.Error("List returned a non-list")
	}
	if k := r.Get("frame.args").Kind(); k != mi.KindList {
		t.Errorf("Kind = %v", k)
	}
}

func TestValueNilSafe(t *testing.T) {
	var v *mi.Value
	if v.Get("a.b") != nil || v.String("a") != "" || v.Len() != 0 || v.Fields() != nil ||
		v.Tuple("a") != nil || v.List("a") != nil || v.All("a") != nil || v.Kind() != 0 {
		t.Error("nil Value is not empty")
	}
	if _, err := v.Int("a"); err == nil {
		t.Error("Int on nil succeeded")
	}
	if v.MI() != `""` {
		t.Errorf("MI() = %q", v.MI())
	}
}

func TestValueListOfResults(t *testing.T) {
	r := mustParse(t, `^done,stack=[frame={level="0",func="grow"},frame={level="1",func="main"}]`)
	frames := r.Results.List("stack")
	if len(frames) != 2 || frames[1].String("func") != "main" {
		t.Fatalf("List(stack) = %v", frames)
	}
	if got := r.String("stack.1.func"); got != "main" {
		t.Errorf("stack.1.func = %q", got)
	}
	if got := r.String("stack.frame.func"); got != "grow" {
		t.Errorf("stack.frame.func = %q (first frame by name)", got)
	}
	if got := r.String("stack.-1.func"); got != "" {
		t.Errorf("negative index = %q", got)
	}
	if got := r.Get("stack").Fields()[0].Name; got != "frame" {
		t.Errorf("field name = %q", got)
	}
}

func TestValueAllMI2Locations(t *testing.T) {
	r := mustParse(t, `^done,bkpt={number="1",addr="<MULTIPLE>"},{number="1.1",func="twice(int)"},{number="1.2",func="twice(double)"}`)
	all := r.Results.All("bkpt")
	if len(all) != 3 {
		t.Fatalf("All(bkpt) has %d values, want 3", len(all))
	}
	if all[2].String("func") != "twice(double)" || r.String("bkpt.number") != "1" {
		t.Errorf("locations = %v, first = %q", all, r.String("bkpt.number"))
	}
}

func TestKindAndTypeNames(t *testing.T) {
	if mi.KindTuple.String() != "tuple" || mi.Kind(0).String() != "invalid" {
		t.Error("Kind names")
	}
	for typ, want := range map[mi.Type]string{
		mi.TypeResult: "result", mi.TypeExec: "exec", mi.TypeNotify: "notify", mi.TypeStatus: "status",
		mi.TypeConsole: "console", mi.TypeTarget: "target", mi.TypeLog: "log", mi.TypePrompt: "prompt",
		mi.TypeUnparsed: "unparsed", mi.Type('x'): "invalid",
	} {
		if typ.String() != want {
			t.Errorf("%c: %q, want %q", typ, typ.String(), want)
		}
	}
	if !mi.TypeExec.IsAsync() || mi.TypeConsole.IsAsync() || !mi.TypeTarget.IsStream() || mi.TypeResult.IsStream() {
		t.Error("IsAsync/IsStream")
	}
}
