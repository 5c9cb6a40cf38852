package plan

import (
	"fmt"
	"math/big"
	"strings"
)

// sizeUnits are the units ParseSize accepts, with their multipliers.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"KB", 1000}, {"MB", 1000 * 1000}, {"GB", 1000 * 1000 * 1000},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30},
}

// maxSize is the largest size ParseSize accepts (1 TiB·1024): larger is
// surely a mistake, and it keeps byte arithmetic far from overflow.
const maxSize = 1 << 50

// ParseSize parses a byte count: a whole or decimal number, an optional
// space and an optional unit, one of B, KB, MB, GB (powers of 1000) and
// KiB, MiB, GiB (powers of 1024), spelt exactly so. "512", "512B", "1KiB",
// "2 MiB" and "1.5KB" are valid; the result must be a whole number of bytes,
// so "1.5B" is not.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" || strings.Count(num, ".") > 1 || num[0] == '.' || num[len(num)-1] == '.' {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("bad size %q: negative", s)
		}
		return 0, fmt.Errorf("bad size %q: expected a number and a unit such as \"1KiB\"", s)
	}
	mult := int64(0)
	if unit == "" {
		mult = 1
	}
	for _, u := range sizeUnits {
		if unit == u.name {
			mult = u.mult
		}
	}
	if mult == 0 {
		return 0, fmt.Errorf("bad size %q: the unit must be B, KB, MB, GB, KiB, MiB or GiB", s)
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, fmt.Errorf("bad size %q: expected a number and a unit such as \"1KiB\"", s)
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, fmt.Errorf("bad size %q: not a whole number of bytes", s)
	}
	if r.Cmp(new(big.Rat).SetInt64(maxSize)) > 0 {
		return 0, fmt.Errorf("bad size %q: too large", s)
	}
	return r.Num().Int64(), nil
}
