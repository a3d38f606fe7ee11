package limiter

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// readCommand matches a script calling a command that reads a key's value: what only get
// (prelude.lua) may do, so that every value read is bounded and shape-checked (issue 39,
// item 1: a record read whole and looped over held Redis 230 ms per call).
var readCommand = regexp.MustCompile(`(?i)redis\.p?call\(\s*['"](m?get|getrange|substr|getex|getdel|strlen|h\w*get\w*|hvals|hkeys|l(range|index|pop)|s(members|randmember|pop)|z\w*range\w*|xrange|xread\w*)['"]`)

// TestScriptsReadKeysOnlyThroughGet: every script Redis runs begins with the prelude, and
// none of them, the prelude aside, calls a command that reads a value: each read goes through
// get, bounded to the most its key kind holds.
func TestScriptsReadKeysOnlyThroughGet(t *testing.T) {
	if m := readCommand.FindAllString(prelude, -1); len(m) != 2 {
		t.Fatalf("the prelude reads with %q; want its two GETRANGE calls only", m)
	}
	for _, s := range AllScripts() {
		if !strings.HasPrefix(s.Source, prelude) || s.Source != prelude+s.body {
			t.Errorf("%s does not begin with the prelude", s.Name)
		}
		if m := readCommand.FindAllString(s.body, -1); len(m) > 0 {
			t.Errorf("%s reads a key with %q: read through get (prelude.lua)", s.Name, m)
		}
		if !strings.Contains(s.Library(), prelude) || strings.Count(s.Library(), "local function get(") != 1 {
			t.Errorf("%s: its function library does not hold the prelude once", s.Name)
		}
	}
}

// TestRingFormatMatchesRing: the prelude writes RINGFORMAT out (a function library's top
// level has no string library to build it): it must be '>' then RING times "dd".
func TestRingFormatMatchesRing(t *testing.T) {
	ring := regexp.MustCompile(`RING = [^\n]*, (\d+)\n`).FindStringSubmatch(prelude)
	format := regexp.MustCompile(`local RINGFORMAT = '([^']*)'`).FindStringSubmatch(prelude)
	if ring == nil || format == nil {
		t.Fatal("the prelude defines no RING or RINGFORMAT")
	}
	n, err := strconv.Atoi(ring[1])
	if err != nil || format[1] != ">"+strings.Repeat("dd", n) {
		t.Fatalf("RINGFORMAT %q for RING %s: want '>' then %s times \"dd\"", format[1], ring[1], ring[1])
	}
}
