package plan

import "testing"

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"0":       0,
		"512":     512,
		"512B":    512,
		"1KiB":    1024,
		"2 MiB":   2 << 20,
		"1GiB":    1 << 30,
		"1.5KB":   1500,
		"1.5KiB":  1536,
		"3MB":     3000000,
		" 4 GB ":  4000000000,
		"0.5 KiB": 512,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":           `bad size "": expected a number and a unit such as "1KiB"`,
		"KiB":        `bad size "KiB": expected a number and a unit such as "1KiB"`,
		"-1KiB":      `bad size "-1KiB": negative`,
		"1kb":        `bad size "1kb": the unit must be B, KB, MB, GB, KiB, MiB or GiB`,
		"1K":         `bad size "1K": the unit must be B, KB, MB, GB, KiB, MiB or GiB`,
		"1.2.3":      `bad size "1.2.3": expected a number and a unit such as "1KiB"`,
		"1.":         `bad size "1.": expected a number and a unit such as "1KiB"`,
		"0.3B":       `bad size "0.3B": not a whole number of bytes`,
		"2000000GiB": `bad size "2000000GiB": too large`,
	} {
		got, err := ParseSize(in)
		if err == nil || err.Error() != want {
			t.Errorf("ParseSize(%q) = %d, %v; want error %q", in, got, err, want)
		}
	}
}

func TestSuggest(t *testing.T) {
	known := []string{"name", "location", "condition", "thread", "skip", "every", "max_hits", "around_call", "commands", "optional"}
	for key, want := range map[string]string{
		"skp":        ` (did you mean "skip"?)`,
		"sikp":       ` (did you mean "skip"?)`,
		"locaton":    ` (did you mean "location"?)`,
		"maxhits":    ` (did you mean "max_hits"?)`,
		"max-hits":   ` (did you mean "max_hits"?)`,
		"aroundcall": ` (did you mean "around_call"?)`,
		"Name":       ` (did you mean "name"?)`,
		"x":          "",
		"colour":     "",
		"ignore":     "",
	} {
		if got := suggest(key, known); got != want {
			t.Errorf("suggest(%q) = %q, want %q", key, got, want)
		}
	}
}
