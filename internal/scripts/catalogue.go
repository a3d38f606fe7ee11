package scripts

import (
	"crypto/sha1" //nolint:gosec // SHA1 is what Redis names scripts by, not a security choice.
	"embed"
	"encoding/hex"
	"fmt"
	"sort"
	"sync"
)

// generated are the composed scripts, as `go generate` wrote them: what Redis runs (and the
// folder's README).
//
//go:embed generated
var generated embed.FS

// FunctionPrefix begins the name of every Redis function library (and function) the scripts
// are loaded as.
const FunctionPrefix = "ratelimit_"

// Composition names one script: a family, and its body (None for Release and Reserve).
type Composition struct {
	Family Family
	Body   Body
}

// Compositions are every script's family and body: each limit family with each body, then
// the standalone families.
func Compositions() []Composition {
	var out []Composition
	for _, f := range LimitFamilies {
		for _, b := range Bodies {
			out = append(out, Composition{f, b})
		}
	}
	for _, f := range Standalone {
		out = append(out, Composition{f, None})
	}
	return out
}

// Script is one composed script, as Redis runs it.
type Script struct {
	Composition
	// Name is the script's stable name: its file's, without ".lua".
	Name string
	// Source is the full Lua text sent with EVAL or SCRIPT LOAD.
	Source string
	// SHA is the lowercase hex SHA1 of Source, as EVALSHA takes it.
	SHA string
	// Function is the name of the Redis function (and of its one-function library, see
	// Library) that runs Source: FunctionPrefix and SHA, so one name means one body.
	Function string
	// ReadOnly marks a script that writes nothing (the peeks): its function is registered
	// with the no-writes flag, so FCALL_RO runs it and a user granted reads only may.
	ReadOnly bool
}

// Library is the source of the Redis function library that holds the script as the one
// function Function, for FUNCTION LOAD (with the no-writes flag for a script that writes
// nothing): its body is Source unchanged, KEYS and ARGV (globals to EVAL) its parameters.
func (s *Script) Library() string {
	if s.ReadOnly {
		return "#!lua name=" + s.Function + "\n" +
			"redis.register_function{function_name='" + s.Function + "', flags={'no-writes'}, callback=function(KEYS, ARGV)\n" +
			s.Source + "\nend}\n"
	}
	return "#!lua name=" + s.Function + "\n" +
		"redis.register_function('" + s.Function + "', function(KEYS, ARGV)\n" + s.Source + "\nend)\n"
}

// catalogue is every script, by composition, read from generated/ on first use (not at
// init: the generator, which writes them, imports this package).
var catalogue = sync.OnceValue(mustLoad)

func mustLoad() map[Composition]*Script {
	out := map[Composition]*Script{}
	for _, c := range Compositions() {
		name := FileName(c.Family, c.Body)
		b, err := generated.ReadFile("generated/" + name)
		if err != nil {
			panic(fmt.Sprintf("scripts: %s is not generated: run go generate ./internal/scripts: %v", name, err))
		}
		sum := sha1.Sum(b) //nolint:gosec // Redis script identity.
		sha := hex.EncodeToString(sum[:])
		out[c] = &Script{Composition: c, Name: name[:len(name)-len(".lua")], Source: string(b), SHA: sha,
			Function: FunctionPrefix + sha, ReadOnly: c.Family == Peek}
	}
	return out
}

// For is the script of family f with body b (None for Release and Reserve), or nil when there
// is none.
func For(f Family, b Body) *Script { return catalogue()[Composition{f, b}] }

// All is every script, sorted by name: what the manager loads on every primary.
func All() []*Script {
	out := make([]*Script, 0, len(catalogue()))
	for _, s := range catalogue() {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
