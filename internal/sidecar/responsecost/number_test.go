package responsecost

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
	"testing"
)

// TestParseJSONCost reads JSON numbers as costs: whole numbers from 0 to MaxCost, exactly.
func TestParseJSONCost(t *testing.T) {
	for _, tc := range []struct {
		num   string
		cost  int64
		found bool
	}{
		{"0", 0, true}, {"21", 21, true}, {"21.0", 21, true}, {"21.000", 21, true}, {"2.1e1", 21, true},
		{"2.1E+1", 21, true}, {"2100e-2", 21, true}, {"0.21e2", 21, true}, {"0.0", 0, true}, {"0e400", 0, true}, {"0.000E2200000000", 0, true},
		{"1e12", 1e12, true}, {"1099511627776", MaxCost, true}, {"1.099511627776e12", MaxCost, true},
		{"1099511627776.0", MaxCost, true}, {"1099511627777", 0, false}, {"1e13", 0, false},
		{"-1", 0, false}, {"-0", 0, false}, {"1.5", 0, false}, {"21.0000000000000001", 0, false},
		{"1e300", 0, false}, {"1e-300", 0, false}, {"2101e-2", 0, false}, {"1e99999999999", 0, false},
		{"99999999999999999999999", 0, false},
	} {
		if !json.Valid([]byte(tc.num)) {
			t.Fatalf("%s is no JSON number", tc.num)
		}
		cost, found := parseJSONCost([]byte(tc.num))
		if found != tc.found || cost != tc.cost {
			t.Errorf("parseJSONCost(%s) = %d, %v; want %d, %v", tc.num, cost, found, tc.cost, tc.found)
		}
	}
}

// FuzzParseJSONCost compares parseJSONCost with exact rational arithmetic.
func FuzzParseJSONCost(f *testing.F) {
	for _, s := range []string{"0", "21", "21.0", "2.1e1", "-1", "1.5", "1e300", "1099511627777", "0e5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, num string) {
		want, wantFound, ok := exactCost(num)
		if !ok {
			return
		}
		if cost, found := parseJSONCost([]byte(num)); found != wantFound || cost != want {
			t.Fatalf("parseJSONCost(%s) = %d, %v; exactly it is %d, %v", num, cost, found, want, wantFound)
		}
	})
}

// exactCost is the cost num states, by big.Rat; ok is false for what it cannot judge: no
// JSON number (or one with spaces around it), or one longer than 40 bytes or with an
// exponent beyond ±60 (big.Rat is slow on those; TestParseJSONCost has some).
func exactCost(num string) (cost int64, found, ok bool) {
	if !json.Valid([]byte(num)) || len(num) > 40 || strings.TrimSpace(num) != num || strings.ContainsAny(num[:1], "[{\"tfn") {
		return 0, false, false
	}
	if i := strings.IndexAny(num, "eE"); i >= 0 {
		if e, err := strconv.Atoi(num[i+1:]); err != nil || e < -60 || e > 60 {
			return 0, false, false
		}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok || num[0] == '-' || !r.IsInt() || !r.Num().IsInt64() || r.Num().Int64() > MaxCost {
		return 0, false, ok
	}
	return r.Num().Int64(), true, true
}

// TestParseHeaderCost reads header field lines as costs.
func TestParseHeaderCost(t *testing.T) {
	for _, tc := range []struct {
		values []string
		cost   int64
		found  bool
	}{
		{[]string{"0"}, 0, true}, {[]string{"42"}, 42, true}, {[]string{"0042"}, 42, true},
		{[]string{"1099511627776"}, MaxCost, true}, {[]string{"1099511627777"}, 0, false},
		{nil, 0, false}, {[]string{""}, 0, false}, {[]string{"1", "1"}, 0, false}, {[]string{"+1"}, 0, false},
		{[]string{"-1"}, 0, false}, {[]string{"1.0"}, 0, false}, {[]string{"1e3"}, 0, false},
		{[]string{" 1"}, 0, false}, {[]string{"1,2"}, 0, false}, {[]string{"９"}, 0, false},
	} {
		cost, found := parseHeaderCost(tc.values)
		if found != tc.found || cost != tc.cost {
			t.Errorf("parseHeaderCost(%q) = %d, %v; want %d, %v", tc.values, cost, found, tc.cost, tc.found)
		}
	}
}
