// Package controller wires the operator's controllers into a manager (Setup): the
// RateLimitPolicy reconciler (package ratelimitpolicy), the snapshot publisher (package
// publishing), the RateLimitOverride reconciler (package ratelimitoverride), the Redises
// and the RedisBackend reconciler (package redisbackend), with the Gateway API reader and
// data plane (package gatewayapi) they share, and one script loader per Redis
// (internal/scripts/loader).
//
// It decides nothing about a policy itself: each package under it owns one concern, and
// Setup only builds them and hands each what it shares with the others. The per-namespace
// Redis users have their own Setup (package tenancy).
package controller
