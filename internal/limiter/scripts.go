package limiter

import (
	"fmt"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// Script is one of the scripts Redis runs (internal/scripts), with how the limiter calls it:
// EVALSHA (EVAL after NOSCRIPT), or, for its function flavour, FCALL (FCALL_RO for one that
// writes nothing) of the function the manager loaded, never EVAL.
type Script struct {
	*scripts.Script

	// cmd and payload are the command that runs the script and its first argument, boxed
	// once: "evalsha" and SHA, or for the function flavour "fcall" (or "fcall_ro") and
	// Function. srcArg is Source, for EVAL.
	cmd, payload, srcArg any
	// fcall marks the function flavour (see asFunction): called with FCALL, never EVAL.
	fcall bool
	// function is the function flavour of this script; nil on the flavour itself.
	function *Script
	// shared, for a check script, is the script that runs several such checks in one call
	// (scripts.Checks, same body and flavour): what a pipeline sends them as (shared.go).
	shared *Script
}

// newScript is the limiter's call of s, with its function flavour.
func newScript(s *scripts.Script) *Script {
	out := &Script{Script: s, cmd: "evalsha", payload: s.SHA, srcArg: s.Source}
	fn := *out
	fn.cmd, fn.payload, fn.fcall = "fcall", s.Function, true
	if s.ReadOnly {
		fn.cmd = "fcall_ro"
	}
	out.function = &fn
	return out
}

// asFunction is the script's function flavour: the same body, called as the Redis function
// Function with FCALL (loaded by the manager with FUNCTION LOAD), and never sent with EVAL.
func (s *Script) asFunction() *Script {
	if s.fcall {
		return s
	}
	return s.function
}

// catalogue is the limiter's call of every script, by family and body; each check script
// knows its shared script, in both flavours.
var catalogue = func() map[scripts.Composition]*Script {
	out := map[scripts.Composition]*Script{}
	for _, s := range scripts.All() {
		out[s.Composition] = newScript(s)
	}
	for _, b := range scripts.Bodies {
		check, shared := out[scripts.Composition{Family: scripts.Check, Body: b}], out[scripts.Composition{Family: scripts.Checks, Body: b}]
		check.shared, check.function.shared = shared, shared.function
	}
	return out
}()

// scriptOf is the script of family f for algorithm a's body.
func scriptOf(f scripts.Family, a Algorithm) *Script {
	return catalogue[scripts.Composition{Family: f, Body: a.desc().body}]
}

// releaseScript gives a slot back; reserveScript records a reservation.
var releaseScript, reserveScript = catalogue[scripts.Composition{Family: scripts.Release}],
	catalogue[scripts.Composition{Family: scripts.Reserve}]

// ScriptFor returns the check script of an algorithm, or an error naming the unknown
// algorithm.
func ScriptFor(a Algorithm) (*Script, error) {
	if _, ok := algorithmTable[a]; !ok {
		return nil, fmt.Errorf("unknown algorithm %q", a)
	}
	return scriptOf(scripts.Check, a), nil
}

// family is every script of f, one per body, in the bodies' order.
func family(f scripts.Family) []*Script {
	out := make([]*Script, 0, len(scripts.Bodies))
	for _, b := range scripts.Bodies {
		out = append(out, catalogue[scripts.Composition{Family: f, Body: b}])
	}
	return out
}

// Scripts returns every body's check script.
func Scripts() []*Script { return family(scripts.Check) }

// PeekScripts returns every body's peek script (a check that writes nothing).
func PeekScripts() []*Script { return family(scripts.Peek) }

// AdjustScripts returns every body's adjustment script (reset, refund, grant, settle).
func AdjustScripts() []*Script { return family(scripts.Adjust) }

// AllScripts is every script Redis runs, sorted by name, for preloading with SCRIPT LOAD or,
// as a function library each (Library), with FUNCTION LOAD.
func AllScripts() []*Script {
	all := scripts.All()
	out := make([]*Script, 0, len(all))
	for _, s := range all {
		out = append(out, catalogue[s.Composition])
	}
	return out
}
