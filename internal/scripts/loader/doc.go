// Package loader keeps the limiter's scripts (internal/scripts) loaded in Redis: SCRIPT LOAD on
// every primary and, for per-namespace users who may only FCALL, FUNCTION LOAD of each
// script's function library; checked every resync, so a Redis restart or SCRIPT FLUSH is
// repaired. The manager runs one ScriptLoader per Redis it serves (internal/controller).
package loader
