package scripts

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestGeneratedScriptsAreTheComposition: every file under generated/ is exactly what Compose
// builds now, and there is no other .lua file there: what Redis runs is what review saw.
// `go generate ./internal/scripts` writes them.
func TestGeneratedScriptsAreTheComposition(t *testing.T) {
	want := map[string]bool{}
	for _, c := range Compositions() {
		src, err := Compose(c.Family, c.Body)
		if err != nil {
			t.Fatal(err)
		}
		name := FileName(c.Family, c.Body)
		want[name] = true
		got, err := os.ReadFile(filepath.Join("generated", name))
		if err != nil || string(got) != src {
			t.Errorf("generated/%s differs from its composition (%v): run go generate ./internal/scripts", name, err)
		}
	}
	files, err := filepath.Glob(filepath.Join("generated", "*.lua"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !want[filepath.Base(f)] {
			t.Errorf("%s is no composition: run go generate ./internal/scripts", f)
		}
	}
	if len(All()) != len(want) {
		t.Errorf("the catalogue holds %d scripts, %d generated", len(All()), len(want))
	}
}

// contract are the header lines every script states: its keys, its arguments, its reply,
// its cost bound and the shapes it refuses (the hostile shapes themselves are sent to every
// script by internal/limiter's TestScriptsRefuseShapesTheyWereNotWrittenFor).
var contract = []string{"-- KEYS[", "-- ARGV", "-- Reply ", "-- Cost ", "-- Refused "}

// TestEveryScriptStatesItsContract: each script begins with the generated-code line, then a
// header stating KEYS, ARGV, the reply, its bound (O(n) in at most 8 limits, or O(1)) and
// what it refuses, all before its first line of code.
func TestEveryScriptStatesItsContract(t *testing.T) {
	for _, s := range All() {
		if !strings.HasPrefix(s.Source, generatedHeader) {
			t.Errorf("%s: no generated-code header", s.Name)
		}
		header := commentHead(s.Source)
		for _, c := range contract {
			if !strings.Contains(header, c) {
				t.Errorf("%s: its header states no %q", s.Name, strings.TrimSpace(c))
			}
		}
		if !bound.MatchString(header) {
			t.Errorf("%s: its header states no bound", s.Name)
		}
		if s.Body != None && !strings.Contains(header, "-- The algorithm: ") {
			t.Errorf("%s: its header says nothing of its algorithm", s.Name)
		}
	}
}

// bound is a header's cost bound: linear in at most 8 limits, or constant.
var bound = regexp.MustCompile(`-- Cost +O\(n\) in the number of (rate )?limits \(n <= 8\)|-- Cost +O\(1\)`)

// commentHead is src's first block of comment lines (and blank ones).
func commentHead(src string) string {
	var b strings.Builder
	for _, l := range strings.Split(src, "\n") {
		if l != "" && !strings.HasPrefix(l, "--") {
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// readCommand matches a script calling a command that reads a key's value: what only get
// (the prelude) may do, so that every value read is bounded and shape-checked (issue 39: a
// record read whole and looped over held Redis 230 ms per call).
var readCommand = regexp.MustCompile(`(?i)redis\.p?call\(\s*['"](m?get|getrange|substr|getex|getdel|strlen|h\w*get\w*|hvals|hkeys|l(range|index|pop)|s(members|randmember|pop)|z\w*range\w*|xrange|xread\w*)['"]`)

// TestScriptsReadKeysOnlyThroughGet: every script holds the prelude's get once, and calls no
// command that reads a value but its two GETRANGEs: each read goes through get, bounded to
// the most its key kind holds.
func TestScriptsReadKeysOnlyThroughGet(t *testing.T) {
	for _, s := range All() {
		if n := strings.Count(s.Source, "local function get(key, most, at)"); n != 1 {
			t.Errorf("%s defines get %d times, want once", s.Name, n)
		}
		if m := readCommand.FindAllString(s.Source, -1); len(m) != 2 || !strings.Contains(m[0], "GETRANGE") || !strings.Contains(m[1], "GETRANGE") {
			t.Errorf("%s reads keys with %q: want get's two GETRANGE calls only", s.Name, m)
		}
	}
}

// TestGetRangeBoundsMatch: each bound get reads up to comes as a number and as the text
// GETRANGE is given (STATE and STATE_AT): the two must say the same, or a read would be cut
// short or let a longer value through.
func TestGetRangeBoundsMatch(t *testing.T) {
	src := For(Check, Bucket).Source
	numbers := regexp.MustCompile(`(?m)^local STATE, REPLAY, RECORD, LEASE, MARK, RING = (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)$`).FindStringSubmatch(src)
	slots := regexp.MustCompile(`(?m)^local SLOTS = (\d+) \* RING$`).FindStringSubmatch(src)
	texts := regexp.MustCompile(`(?m)^local STATE_AT, REPLAY_AT, RECORD_AT, LEASE_AT, MARK_AT, SLOTS_AT = '(\d+)', '(\d+)', '(\d+)', '(\d+)', '(\d+)', '(\d+)'$`).FindStringSubmatch(src)
	if numbers == nil || slots == nil || texts == nil {
		t.Fatalf("the prelude's bounds are not in the form this test reads:\n%s", src[:min(len(src), 6000)])
	}
	ring, _ := strconv.Atoi(numbers[6])
	per, _ := strconv.Atoi(slots[1])
	want := append(numbers[1:6:6], strconv.Itoa(per*ring))
	for i, name := range []string{"STATE", "REPLAY", "RECORD", "LEASE", "MARK", "SLOTS"} {
		if texts[i+1] != want[i] {
			t.Errorf("%s is %s but %s_AT is '%s'", name, want[i], name, texts[i+1])
		}
	}
}

// TestRingFormatMatchesRing: the prelude writes RINGFORMAT out (a function library's top
// level has no string library to build it): it must be '>' then RING times "dd".
func TestRingFormatMatchesRing(t *testing.T) {
	src := For(Acquire, Bucket).Source
	ring := regexp.MustCompile(`RING = [^\n]*, (\d+)\n`).FindStringSubmatch(src)
	format := regexp.MustCompile(`local RINGFORMAT = '([^']*)'`).FindStringSubmatch(src)
	if ring == nil || format == nil {
		t.Fatal("the prelude defines no RING or RINGFORMAT")
	}
	n, err := strconv.Atoi(ring[1])
	if err != nil || format[1] != ">"+strings.Repeat("dd", n) {
		t.Fatalf("RINGFORMAT %q for RING %s: want '>' then %s times \"dd\"", format[1], ring[1], ring[1])
	}
}

// TestNoBlockLeftUnused: every named block a source file defines is used by some script
// (a block nobody includes is text a reader would look for in vain).
func TestNoBlockLeftUnused(t *testing.T) {
	entries, err := sources.ReadDir("lua")
	if err != nil {
		t.Fatal(err)
	}
	define := regexp.MustCompile(`\{\{-? ?define "([^"]+)"`)
	use := regexp.MustCompile(`\{\{-? ?(?:template|include) "([^"]+)"`)
	defined, used := map[string]string{}, map[string]bool{}
	for _, e := range entries {
		b, err := sources.ReadFile("lua/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range define.FindAllStringSubmatch(string(b), -1) {
			defined[m[1]] = e.Name()
		}
		for _, m := range use.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
		}
	}
	for name, file := range defined {
		if !used[name] {
			t.Errorf("%s defines %q, which no script uses", file, name)
		}
	}
}
