package main

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// execute runs snapctl with args and returns stdout and the error.
func execute(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd("test")
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&bytes.Buffer{})
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

const recordedMassif = "../../testdata/massif/"

func TestShowCommand(t *testing.T) {
	out, err := execute(t, "", "show", recordedMassif+"threshold.massif")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"massif file ../../testdata/massif/threshold.massif\n",
		"->94.61% (97.7 KiB) 0x109146: big (threshold.c:14)\n",
		"->00.57% (600 B) in 3 places, all below massif's threshold\n",
		"7 snapshots, 7 detailed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show output lacks %q:\n%s", want, out)
		}
	}

	out, err = execute(t, "", "show", "--threshold", "5", "--format", "json", recordedMassif+"threshold.massif#6")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Schema    string
		Snapshots []struct {
			Index int
			Tree  struct {
				Children []struct {
					Bytes       int64
					BelowPlaces int `json:"below_places"`
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if doc.Schema != "snapctl.show/v1" || len(doc.Snapshots) != 1 || doc.Snapshots[0].Index != 6 {
		t.Fatalf("json: %+v", doc)
	}
	kids := doc.Snapshots[0].Tree.Children
	if len(kids) != 2 || kids[0].Bytes != 100000 || kids[1].Bytes != 5700 || kids[1].BelowPlaces != 4 {
		t.Errorf("--threshold 5 children = %+v, want big (100000) and 5700 bytes in 4 places", kids)
	}

	data, err := os.ReadFile(recordedMassif + "leak.detailed.massif")
	if err != nil {
		t.Fatal(err)
	}
	out, err = execute(t, string(data), "show", "-")
	if err != nil || !strings.Contains(out, "->98.43% (1000 B) 0x10916D: make_payload (leak.c:12)") {
		t.Errorf("show - = %v:\n%s", err, out)
	}
}

func TestShowCommandErrors(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		want     string
		wantCode int
	}{
		{[]string{"show"}, "show takes one massif file, got 0 arguments", exitUsage},
		{[]string{"show", "--format", "xml", recordedMassif + "leak.massif"}, `invalid argument "xml" for "--format" flag: want text or json`, exitUsage},
		{[]string{"show", "--threshold", "200", recordedMassif + "leak.massif"}, "--threshold 200", exitUsage},
		{[]string{"show", "nonexistent.massif"}, "massif file nonexistent.massif does not exist", exitFailure},
		{[]string{"show", recordedMassif + "leak.massif#99"}, "has no snapshot 99", exitFailure},
		{[]string{"show", recordedMassif + "leak.c"}, "massif file ../../testdata/massif/leak.c:1: expected", exitFailure},
	} {
		_, err := execute(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want %q", tc.args, err, tc.want)
			continue
		}
		if code, _ := describe(err); code != tc.wantCode {
			t.Errorf("%v: exit code %d, want %d", tc.args, code, tc.wantCode)
		}
	}
}
