package responsecost

import (
	"bytes"
	"strconv"
)

// maxCostDigits is how many decimal digits MaxCost has.
const maxCostDigits = 13

// parseHeaderCost is the cost a header's field lines state: exactly one line whose value is
// a whole number from 0 to MaxCost in decimal digits.
func parseHeaderCost(values []string) (int64, bool) {
	if len(values) != 1 {
		return 0, false
	}
	return parseDigits([]byte(values[0]))
}

// parseDigits reads b, decimal digits only (no sign, no space), as a cost from 0 to MaxCost.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	b = bytes.TrimLeft(b, "0")
	if len(b) > maxCostDigits {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > MaxCost {
		return 0, false
	}
	return n, true
}

// parseJSONCost reads num, a valid JSON number, as a cost: a whole number from 0 to
// MaxCost, exactly (21, 21.0, 2.1e1 and 2100e-2 are 21; 1.5, -1 and 1e300 are none).
func parseJSONCost(num []byte) (int64, bool) {
	if len(num) == 0 || num[0] == '-' {
		return 0, false
	}
	mant, expPart := num, []byte(nil)
	if i := bytes.IndexAny(num, "eE"); i >= 0 {
		mant, expPart = num[:i], num[i+1:]
	}
	intPart, frac := mant, []byte(nil)
	if i := bytes.IndexByte(mant, '.'); i >= 0 {
		intPart, frac = mant[:i], mant[i+1:]
	}
	// The value is digits * 10^exp, digits being intPart and frac run together without
	// their leading and trailing zeros.
	digits := bytes.TrimLeft(append(append([]byte(nil), intPart...), frac...), "0")
	trimmed := bytes.TrimRight(digits, "0")
	if len(trimmed) == 0 {
		return 0, true // zero, whatever the exponent
	}
	exp := int64(len(digits)-len(trimmed)) - int64(len(frac))
	if len(expPart) > 0 {
		e, err := strconv.ParseInt(string(expPart), 10, 32)
		if err != nil {
			return 0, false
		}
		exp += e
	}
	if exp < 0 || int64(len(trimmed))+exp > maxCostDigits {
		return 0, false
	}
	n, ok := parseDigits(trimmed)
	for ; ok && exp > 0; exp-- {
		n *= 10
	}
	if !ok || n > MaxCost {
		return 0, false
	}
	return n, true
}
