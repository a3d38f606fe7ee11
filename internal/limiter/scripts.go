package limiter

import (
	"crypto/sha1" //nolint:gosec // SHA1 is what Redis names scripts by, not a security choice.
	"embed"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// Algorithm is a counting algorithm; the names match the RateLimitPolicy API.
type Algorithm string

const (
	// TokenBucket refills requests/period continuously up to burst.
	TokenBucket Algorithm = "TokenBucket"
	// SlidingWindow weights the previous window's count by its remaining overlap.
	SlidingWindow Algorithm = "SlidingWindow"
	// FixedWindow counts requests in aligned windows of one period.
	FixedWindow Algorithm = "FixedWindow"
	// GCRA is the generic cell rate algorithm (virtual scheduling).
	GCRA Algorithm = "GCRA"
)

//go:embed lua/*.lua
var luaFS embed.FS

// Script is one algorithm's Lua script: the algorithm file's header followed by the shared
// driver with the algorithm's bodies inlined.
type Script struct {
	// Name is the script's stable name, e.g. "token_bucket".
	Name string
	// Algorithm is the algorithm it runs.
	Algorithm Algorithm
	// Source is the full Lua text sent with EVAL or SCRIPT LOAD.
	Source string
	// SHA is the lowercase hex SHA1 of Source, as EVALSHA takes it.
	SHA string
	// Function is the name of the Redis function (and of its one-function library, see
	// Library) that runs Source: FunctionPrefix and SHA, so one name means one body.
	Function string

	// cmd and payload are the command that runs the script and its first argument, boxed
	// once: "evalsha" and SHA, or for the function flavour "fcall" and Function. srcArg is
	// Source, for EVAL.
	cmd, payload, srcArg any
	// fcall marks the function flavour (see asFunction): called with FCALL, never EVAL.
	fcall bool
	// readOnly marks a script that writes nothing (the peeks): its function is registered
	// with the no-writes flag and called with FCALL_RO, which a user granted reads only
	// (the manager's administrative user) may run, and which refuses any function that could
	// write.
	readOnly bool
	// function is the function flavour of this script; nil on the flavour itself.
	function *Script
	// body is Source without the prelude: a function library holds the prelude once, outside
	// its function, so that FCALL does not make get anew on every call.
	body string
}

// FunctionPrefix begins the name of every Redis function library (and function) the
// limiter's scripts are loaded as.
const FunctionPrefix = "ratelimit_"

var scripts, leaseScripts, peekScripts, adjustScripts = mustLoadScripts()

// acquireScripts are every algorithm's acquire script (a check that takes a concurrency
// slot; acquire.lua), and releaseScript gives a slot back (release.lua).
var acquireScripts, releaseScript = mustLoadSlotScripts()

// reserveScript records a reservation for its settlement (reserve.lua).
var reserveScript = newScript("reserve", "", mustRead("lua/reserve.lua"))

// prelude begins every script: get, the one way a script reads a key (prelude.lua).
var prelude = mustRead("lua/prelude.lua")

func mustLoadSlotScripts() (map[Algorithm]*Script, *Script) {
	driver, read := mustRead("lua/acquire.lua"), mustRead("lua/keep_usage.lua")
	out := map[Algorithm]*Script{}
	for alg, name := range algorithmFiles {
		body, keeps := inlineRead(mustRead("lua/"+name+".lua"), read)
		body, _ = cutAdjust(body)
		out[alg] = newScript(name+"_acquire", alg, composeLoop(body, withKeeps(driver, keeps)))
	}
	return out, newScript("release", "", mustRead("lua/release.lua"))
}

func mustLoadScripts() (algorithms, leases, peeks, adjusts map[Algorithm]*Script) {
	driver, leaseDriver, peekDriver := mustRead("lua/driver.lua"), mustRead("lua/lease.lua"), mustRead("lua/peek.lua")
	adjustDriver, read := mustRead("lua/adjust.lua"), mustRead("lua/keep_usage.lua")
	out, lease, peek, adjust := map[Algorithm]*Script{}, map[Algorithm]*Script{}, map[Algorithm]*Script{}, map[Algorithm]*Script{}
	for a, name := range algorithmFiles {
		alg, keeps := inlineRead(mustRead("lua/"+name+".lua"), read)
		alg, adj := cutAdjust(alg)
		out[a] = newScript(name, a, compose(alg, withKeeps(driver, keeps)))
		lease[a] = newScript(name+"_lease", a, composeLoop(alg, withKeeps(leaseDriver, keeps)))
		peek[a] = readOnly(newScript(name+"_peek", a, composeLoop(alg, withKeeps(peekDriver, keeps))))
		adjust[a] = newScript(name+"_adjust", a, composeAdjust(alg, adj, withKeeps(adjustDriver, keeps)))
	}
	return out, lease, peek, adjust
}

// algorithmFiles names each algorithm's file in lua/ (without ".lua").
var algorithmFiles = map[Algorithm]string{
	TokenBucket: "token_bucket", SlidingWindow: "sliding_window", FixedWindow: "fixed_window", GCRA: "gcra",
}

// cutAdjust splits an algorithm file at its "-- @adjust" marker: the check's text before it,
// the adjustment (adjust.lua's per-limit change, without the marker line) after it.
func cutAdjust(algorithm string) (check, adjust string) {
	check, adjust, ok := strings.Cut(algorithm, "-- @adjust")
	if !ok || strings.Contains(adjust, "-- @adjust") {
		panic("limiter scripts: want one -- @adjust marker in each algorithm, after its @body")
	}
	_, adjust, _ = strings.Cut(adjust, "\n")
	return check, strings.TrimRight(adjust, "\n")
}

// composeAdjust builds an algorithm's adjustment script: adjust.lua with the algorithm's loop
// body inlined at both of its "-- @check" markers (the state read before and after) and its
// adjustment at "-- @adjust".
func composeAdjust(algorithm, adjust, driver string) string {
	if strings.Count(driver, "-- @check") != 2 || strings.Count(driver, "-- @adjust") != 1 {
		panic("limiter scripts: want two -- @check markers and one -- @adjust in adjust.lua")
	}
	once := composeLoop(algorithm, strings.Replace(driver, "-- @check", "-- @first", 1))
	return strings.Replace(strings.Replace(once, "-- @first", loopBody(algorithm), 1), "-- @adjust", adjust, 1)
}

// newScript is the script whose own text is body: prelude.lua, then body.
func newScript(name string, alg Algorithm, body string) *Script {
	src := prelude + body
	sum := sha1.Sum([]byte(src)) //nolint:gosec // Redis script identity.
	sha := hex.EncodeToString(sum[:])
	s := &Script{Name: name, Algorithm: alg, Source: src, SHA: sha, Function: FunctionPrefix + sha,
		body: body, cmd: "evalsha", payload: sha, srcArg: src}
	fn := *s
	fn.cmd, fn.payload, fn.fcall = "fcall", s.Function, true
	s.function = &fn
	return s
}

// readOnly marks s as writing nothing (see Script.readOnly).
func readOnly(s *Script) *Script {
	s.readOnly, s.function.readOnly, s.function.cmd = true, true, "fcall_ro"
	return s
}

// asFunction is the script's function flavour: the same body, called as the Redis function
// Function with FCALL (loaded by the manager with FUNCTION LOAD), and never sent with EVAL.
func (s *Script) asFunction() *Script {
	if s.fcall {
		return s
	}
	return s.function
}

// Library is the source of the Redis function library that holds the script as the one
// function Function, for FUNCTION LOAD (with the no-writes flag for a script that writes
// nothing): the prelude, run once when the library loads, then the function, whose body is
// the script's own text unchanged: KEYS and ARGV, globals to EVAL, are its parameters.
func (s *Script) Library() string {
	if s.readOnly {
		return "#!lua name=" + s.Function + "\n" + prelude +
			"redis.register_function{function_name='" + s.Function + "', flags={'no-writes'}, callback=function(KEYS, ARGV)\n" +
			s.body + "\nend}\n"
	}
	return "#!lua name=" + s.Function + "\n" + prelude +
		"redis.register_function('" + s.Function + "', function(KEYS, ARGV)\n" + s.body + "\nend)\n"
}

// The keep-usage shape (ARGV ending in 'keep') is taken by the scripts of the algorithms
// whose bodies read state through keep_usage.lua, marked by "-- @read" lines: for them the
// driver's keepsLine becomes keepsTrue; the others refuse the shape.
const (
	readMarker = "-- @read\n"
	keepsLine  = "\nlocal keeps = false\n"
	keepsTrue  = "\nlocal keeps = true\n"
)

// inlineRead replaces every "-- @read" line of an algorithm with keep_usage.lua's code (after
// its own @read marker line), the one reading of a TokenBucket or GCRA state value, and
// reports whether there was any.
func inlineRead(algorithm, read string) (string, bool) {
	_, code, ok := strings.Cut(read, readMarker)
	if !ok {
		panic("limiter scripts: want a -- @read marker line in keep_usage.lua")
	}
	return strings.ReplaceAll(algorithm, readMarker, code), strings.Contains(algorithm, readMarker)
}

// withKeeps is a driver (driver.lua, lease.lua) that takes the keep-usage shape when keeps.
func withKeeps(driver string, keeps bool) string {
	if strings.Count(driver, keepsLine) != 1 {
		panic("limiter scripts: want one \"local keeps = false\" line in each driver")
	}
	if !keeps {
		return driver
	}
	return strings.Replace(driver, keepsLine, keepsTrue, 1)
}

// composeLoop builds an algorithm's lease or peek script: the driver (lease.lua, peek.lua)
// with the algorithm's loop body (after "-- @body") inlined at its "-- @check" marker.
func composeLoop(algorithm, driver string) string {
	if strings.Count(driver, "-- @check") != 1 {
		panic("limiter scripts: want one -- @check in lease.lua, peek.lua and acquire.lua")
	}
	return strings.Replace(driver, "-- @check", loopBody(algorithm), 1)
}

// loopBody is an algorithm's loop body: its text after the "-- @body" marker line.
func loopBody(algorithm string) string {
	_, body, ok := strings.Cut(algorithm, "-- @body")
	if !ok {
		panic("limiter scripts: want a -- @body marker in the algorithm")
	}
	_, body, _ = strings.Cut(body, "\n")
	return strings.TrimRight(body, "\n")
}

// compose builds a script: the algorithm file's header (its protocol comment), then the
// driver with the algorithm's single-limit body (after "-- @single") inlined at its
// "-- @single" marker and its loop body (after "-- @body") at "-- @check". Inlining, rather
// than calling a function, spares Redis a closure and a call per check.
func compose(algorithm, driver string) string {
	header, rest, ok1 := strings.Cut(algorithm, "-- @single")
	single, body, ok2 := strings.Cut(rest, "-- @body")
	if !ok1 || !ok2 || strings.Count(algorithm, "-- @single") != 1 || strings.Count(algorithm, "-- @body") != 1 ||
		strings.Count(driver, "-- @single") != 1 || strings.Count(driver, "-- @check") != 1 {
		panic("limiter scripts: want one -- @single and one -- @body marker in the algorithm, one -- @single and one -- @check in the driver")
	}
	markerBody := func(s string) string {
		_, s, _ = strings.Cut(s, "\n") // drop the rest of the marker line
		return strings.TrimRight(s, "\n")
	}
	driver = strings.Replace(driver, "-- @single", markerBody(single), 1)
	driver = strings.Replace(driver, "-- @check", markerBody(body), 1)
	return header + driver
}

func mustRead(name string) string {
	b, err := luaFS.ReadFile(name)
	if err != nil {
		panic(fmt.Sprintf("embedded script %s: %v", name, err))
	}
	return string(b)
}

// ScriptFor returns the script of an algorithm, or an error naming the unknown algorithm.
func ScriptFor(a Algorithm) (*Script, error) {
	s, ok := scripts[a]
	if !ok {
		return nil, fmt.Errorf("unknown algorithm %q", a)
	}
	return s, nil
}

// Scripts returns every algorithm's check script, sorted by name.
func Scripts() []*Script { return sorted(scripts) }

// LeaseScripts returns every algorithm's lease script (the local tier), sorted by name.
func LeaseScripts() []*Script { return sorted(leaseScripts) }

// PeekScripts returns every algorithm's peek script (a check that writes nothing), sorted by
// name.
func PeekScripts() []*Script { return sorted(peekScripts) }

// AdjustScripts returns every algorithm's adjustment script (reset, refund, grant; see
// Limiter.Adjust), sorted by name.
func AdjustScripts() []*Script { return sorted(adjustScripts) }

// SlotScripts returns every algorithm's acquire script (a check that takes a concurrency
// slot), sorted by name, and the release script.
func SlotScripts() []*Script { return append(sorted(acquireScripts), releaseScript) }

// AllScripts is Scripts, LeaseScripts, PeekScripts, AdjustScripts, SlotScripts and the
// reserve script, for preloading with SCRIPT LOAD or, as a function library each (Library),
// with FUNCTION LOAD.
func AllScripts() []*Script {
	out := append(append(append(append(Scripts(), LeaseScripts()...), PeekScripts()...), AdjustScripts()...), SlotScripts()...)
	return append(out, reserveScript)
}

func sorted(m map[Algorithm]*Script) []*Script {
	out := make([]*Script, 0, len(m))
	for _, s := range m {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
