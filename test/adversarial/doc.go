// Package adversarial tries the limiter the way an attacker and an ordinary operator would:
// a client trying to get more than its quota, a tenant trying to hurt another caller, an
// operator editing policies under load, Redis failing halfway. Every case runs the real
// sidecar code (engine, reverse proxy, check API, Envoy RLS front, limiter) against real
// redis-server processes, and asserts what the attacker got: requests forwarded, quota
// spent, figures reported. Each case names the class it belongs to; the regressions of
// issue 13 have one case per class, the rest are classes found while hardening.
package adversarial
