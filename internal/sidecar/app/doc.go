// Package app runs the sidecar: it assembles the engine, a snapshot source, the Redis client
// and the fronts, serves them, and drains them on shutdown.
package app
