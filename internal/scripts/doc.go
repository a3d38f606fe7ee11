// Package scripts holds every Lua script the limiter runs in Redis: their sources, the one
// composition that builds them, the composed scripts themselves as plain Lua checked in
// under generated/ (what Redis runs, byte for byte), and their identities (SHA, function
// name, function library).
//
// A script is a family and, for the families that decide limits, an algorithm body:
//
//   - families (lua/<family>.lua): check (every limit checked and debited at once), peek (a
//     check that writes nothing), adjust (resets, refunds, grants, settlements), lease (the
//     local tier), acquire (a check that takes a concurrency slot); and two that decide no
//     limit: release (a slot given back) and reserve (a reservation recorded);
//   - bodies (lua/<body>.lua): bucket (TokenBucket and GCRA, which admit exactly the same
//     requests), fixed_window, sliding_window. Each defines, as text/template blocks, the
//     pieces the families call by name: "about" (the state and the two numbers of a limit),
//     "limit" (one limit decided), "adjust" (one limit changed), "unlease", "offset" and
//     "mark" (one limit's part of a lease); the bucket also "read" (its state's formats);
//   - lua/prelude.lua: "prelude", the one way any script reads a key (get, bounded), and the
//     most each key kind holds; lua/decide.lua: "fold", "deny" and "commit", the decision the
//     check and the acquire share.
//
// Compose executes a family's template with its body's blocks; `go generate` (gen/) writes
// every composition to generated/<family>_<body>.lua; the package embeds those files, and a
// test fails when they differ from what Compose builds (make verify-generated too). No other
// code edits Lua text.
package scripts

//go:generate go run ./gen
