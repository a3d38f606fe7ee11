// Package adversarial tries the limiter the way an attacker and an ordinary operator would:
// a client trying to get more than its quota, a tenant trying to hurt another caller, an
// operator editing policies under load, Redis failing halfway. Every case runs the real
// sidecar code (engine, reverse proxy, check API, limiter, listener limits) against real
// redis-server processes (standalone and Cluster), and asserts what the attacker got:
// requests forwarded, quota spent, figures reported, memory kept.
//
// The classes of issue 13, one case each (and the case's file):
//
//   - a path spelled so limiter and upstream disagree (TestPathSpellingsCannotWalkAroundALimit, http)
//   - an idempotency key as a free pass (TestReusedIdempotencyKeyIsNoFreePass, idempotency)
//   - an edit corrupting live identities (TestRaisingAPeriodDoesNotLockCallersOut, limits)
//   - rounding or truncation admitting more (TestUnrepresentableLimitsRefused, limits)
//   - one bad policy as an outage (TestOneUncompilablePolicyIsNoOutage, limits;
//     TestOnePolicysFailingKeysAreNoOutage, faults)
//   - a script sent twice after a lost reply (TestLostReplyIsNeverResentOnCluster, faults)
//   - a breaker that never closes (TestShardRecoversAfterItsPrimaryFailsBack, faults)
//   - memory a client controls (TestHugeIdentitiesKeepBoundedMemory, memory)
//   - the smaller holes: ambiguous headers and lower-case bearer (TestAmbiguousHeadersAreRefused),
//     slow and oversized clients (TestSlowAndOversizedClientsAreCutOff), the forwarded-for
//     chain (TestForwardedForIsAppendedAndShortChainsNotTrusted), a snapshot file with two
//     limits of one name (TestSnapshotFileWithDuplicateLimitNamesRefused)
//
// Classes found while hardening, beyond the list:
//
//   - one policy's idempotency record replayed for another (TestIdempotencyRecordNotSharedAcrossPolicies)
//   - one identity source spending another's quota (TestIdentitySourcesCannotImpersonateEachOther)
//   - a method override running another handler (TestMethodOverrideIsJudgedAsTheMethodRun)
//   - HEAD served by the GET handler (TestHeadIsJudgedAsGet)
//   - hop-by-hop headers the upstream never receives (TestHopByHopHeadersDoNotCount)
//   - host spellings (TestHostSpellingsCannotWalkAroundALimit)
//   - escaping by presenting no identity (TestNoIdentityIsNoEscape)
//   - an invalid edit lifting an enforced limit (TestInvalidEditKeepsTheLastValidVersion)
//   - edits under load (TestEditsUnderLoadNeverOverAdmit)
//   - Redis killed mid-burst (TestRedisKilledMidBurstNeverOverAdmits)
//   - SCRIPT FLUSH mid-burst (TestScriptFlushMidBurstAdmitsExactlyTheLimit)
//
// Issue 14 (tenancy): a tenant naming another tenant's keys, refused by the webhook's rule
// and by the sidecar (TestTenantCannotNameAnotherNamespacesKeys, tenancy); what Redis itself
// refuses a namespace's own credentials is proved in internal/redisacl and
// test/integration/controller.
//
// Issue 25 (trust II: a tenant holding only its own sidecar's credentials, on a Redis shared
// with other namespaces; the tenant rig, tenants_rig_test.go, runs the manager's own code
// for users and functions on a redis-server configured as the Security model asks):
//
//   - a script that writes and never ends, stalling Redis for every tenant
//     (TestTenantCannotStallRedisWithAScript, tenants)
//   - the EVAL script cache filled past maxmemory (TestTenantCannotFillTheScriptCache)
//   - the limiter's own functions made to loop by their arguments
//     (TestTenantCannotMakeTheLimitersFunctionsLoop; every script's shape check in
//     internal/limiter TestScriptsRefuseShapesTheyWereNotWrittenFor)
//   - every granted command family tried for a stall, memory outside the tenant's keys or
//     another namespace's keys: huge commands and replies, WAIT forever, FCALL_RO
//     (TestTenantsGrantedCommandsStayInTheirLane)
//   - leases over-admitting across a failover with a lagging replica, and a lease or a local
//     cap spent after its window ended while its caller waited for the lock: these need the
//     limiter's internals (its lease lock, a replica whose stream is withheld) and live in
//     internal/limiter (TestLeasesAddNothingAFailoverLoses,
//     TestLeaseIsNotSpentPastItsWindowAfterWaitingForTheLock,
//     TestLocalCapIsNotSpentPastItsWindowAfterWaitingForTheLock)
//
// Beyond the list: another tenant's callers read from key names, keyspace events,
// MONITOR, CLIENT LIST or SLOWLOG (TestTenantCannotSeeOtherTenantsCallers).
//
// Issue 25 (item 6, host-scoped policies behind a catch-all gateway), one case each:
//
//   - a Host gateways and upstreams read differently, as an empty label, a second port or
//     percent-encoding (TestHostsUpstreamsReadDifferentlyAreRefused, hosts)
//   - a host the gateway does not serve, or a spelling of the limited one, reaching the app
//     unlimited through real Caddy and nginx with the shipped configs
//     (test/e2e/gateways TestHostSpellingsThroughRealProxies)
//   - an absolute request target routed by its host while ingress-nginx tells the limiter the
//     Host header (test/e2e/gateways TestIngressNginxJudgesTheRoutedHost;
//     internal/sidecar/forwardauth TestRoutedHostIsJudged)
//
// Issue 39 (trust III: every value a script reads from a key a tenant can write is
// shape-checked before any loop, and every client-supplied fact that changes a counter is
// bound to something the sidecar recorded), one regression case per defect, each failing on
// 116b2b8:
//
//   - a tenant's own adjustment record of 1 MiB looped over, stalling Redis for every tenant
//     (TestTenantsOwnRecordCannotStallRedis, records)
//   - settlements of reservations never made, or made once and settled again
//     (TestSettlementGivesBackOnlyWhatWasReserved, TestInventedReservationsGiveNothingBack,
//     settle)
//   - an Envoy stream end settling another caller's admission under a shared request id
//     (TestStreamEndSettlesOnlyItsOwnCaller, streamends)
//   - slots making a call O(1000) (TestSlotsCostBoundedAtTheirMaximum, slots)
//
// and the class, beyond the list:
//
//   - hostile values (1 MiB, a byte short or long, NaN and infinities, a list) in every key
//     kind of docs/security.md's table, every function that reads it called as the tenant:
//     bounded Redis time and no over-admission (TestHostileValuesInEveryKeyKind,
//     hostile_values)
//   - an idempotency record whose figures no check writes, replayed as a reply the sidecar
//     could not read and answered by FailOpen (TestForgedReplayRecordIsNoAdmission, records)
//   - another caller's reservation, or one's own settled before, settled again
//     (TestReservationIsBoundToItsCaller, TestSettledReservationCannotBeResettled,
//     reservations)
//   - a stream end forged under another caller's request id (TestStreamEndOfAnotherCallerSettlesNothing,
//     streamends)
//   - releases of slots never taken, or another caller's (TestReleaseFreesOnlySlotsItTook, slots)
//
// Issue 25 (what tenants share):
//
//   - Redis memory, which has no per-user quota: one tenant filling it gets another's
//     counters evicted and its exhausted identities admitted again with allkeys-lru, and the
//     manager's memory monitor must report it (CountersEvictable) and name the tenant
//     holding keys without a TTL; with noeviction none is admitted, FailClosed deciding on
//     OOM (TestEvictableCountersReadmitAndAreReported, TestNoEvictionNeverReadmits,
//     memory_eviction)
package adversarial
