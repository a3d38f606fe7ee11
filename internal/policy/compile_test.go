package policy_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Templates used by several cases.
const (
	defaultState = "{rl:${namespace}/${policy}:${identity}}:${limit}"
	defaultIdem  = "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}"
	otherTagIdem = "{idem:${namespace}/${policy}:${identity}}:${requestId}"
)

// Slots of the sample keys for namespace "shop", policy "api-per-key", identity "alice",
// request id "req-1", as redis-server's CLUSTER KEYSLOT reports them:
//
//	{rl:shop/api-per-key:alice}:per-second  -> 408
//	{idem:shop/api-per-key:alice}:req-1     -> 3256
const (
	stateSlot = "408"
	idemSlot  = "3256"
)

// rejectCase breaks the base policy one way. Default runs first unless raw is set.
type rejectCase struct {
	name   string
	raw    bool // skip policy.Default: the object as the controller may find it stored
	mutate func(p *v1alpha1.RateLimitPolicy)
	field  string   // exact path of the error that names the problem
	msgs   []string // fragments that error's message must contain
	also   []string // other paths that may be reported for the same mistake
}

func twoWindows(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
	p.Spec.Limits = []v1alpha1.Limit{limit("per-second", 10, time.Second, 0), limit("per-minute", 100, time.Minute, 0)}
}

func sliding(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Algorithm = v1alpha1.AlgorithmSlidingWindow
	p.Spec.Limits = []v1alpha1.Limit{limit("per-minute", 100, time.Minute, 0)}
}

var rejectCases = []rejectCase{
	// Sharded global limits: Fixed identities, ${identity} in the tag, a share per shard.
	{name: "shards on a per-caller identity",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](3)} },
		field:  "spec.hotKeys.shards", msgs: []string{"every identity source must be Fixed"}},
	{name: "shards with a tag without ${identity}",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			fixedOnly(p)
			p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](3)}
			layout(p, "{rl:${namespace}/${policy}}:${identity}:${limit}", "", 0)
		},
		field: "spec.hotKeys.shards", msgs: []string{"hash tag must contain ${identity}"}},
	{name: "more shards than requests",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			fixedOnly(p)
			p.Spec.HotKeys = &v1alpha1.HotKeys{Shards: ptr.To[int32](16)}
			p.Spec.Limits = []v1alpha1.Limit{limit("tiny", 10, time.Second, 0)}
		},
		field: "spec.limits[0].requests", msgs: []string{"16 shards need at least 16 requests"}},
	// One Cluster slot per call: every key shares one non-empty hash tag.
	{name: "idempotency key on another hash tag than the state key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { idempotent(p); layout(p, "", otherTagIdem, 0) },
		field:  "spec.keyLayout.idempotency",
		msgs: []string{`"` + otherTagIdem + `"`, `"` + defaultState + `"`, "{idem:${namespace}/${policy}:${identity}}",
			"{rl:${namespace}/${policy}:${identity}}", `identity "alice"`, "slots " + idemSlot + " and " + stateSlot}},
	{name: "idempotency key outside any hash tag",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "rl:${namespace}/${policy}:${identity}:idem:${requestId}", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{"has hash tag {} but the state key", "every key of a call must share one tag"}},
	{name: "request id inside the idempotency hash tag",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "{rl:${namespace}/${policy}:${identity}:${requestId}}", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{"has hash tag {rl:${namespace}/${policy}:${identity}:${requestId}}", "one Cluster slot"}},
	{name: "no hash tag with SlidingWindow and idempotency",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			sliding(p)
			idempotent(p)
			layout(p, "rl:${namespace}/${policy}:${identity}:${limit}", "", 0)
		},
		field: "spec.keyLayout.state", msgs: []string{`"rl:${namespace}/${policy}:${identity}:${limit}" has no hash tag`, "one Cluster slot"}},
	{name: "no hash tag with two limits",
		mutate: func(p *v1alpha1.RateLimitPolicy) { twoWindows(p); layout(p, "rl:${identity}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`"rl:${identity}:${limit}" has no hash tag`}},
	{name: "no hash tag with idempotency",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "rl:${namespace}/${policy}:${identity}", "", 0)
		},
		field: "spec.keyLayout.state", msgs: []string{"has no hash tag", "a call touches several keys"}},
	{name: "empty hash tag in the state key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{}:rl:${identity}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`"{}:rl:${identity}:${limit}" starts with the empty hash tag {}`, "Redis ignores"}},
	{name: "empty hash tag in a multi-key state key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { twoWindows(p); layout(p, "{}:${identity}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"empty hash tag {}"}},
	{name: "empty hash tag in the idempotency key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { idempotent(p); layout(p, "", "{}:idem:${requestId}", 0) },
		field:  "spec.keyLayout.idempotency", msgs: []string{`"{}:idem:${requestId}" starts with the empty hash tag {}`}},

	// Templates must hold what the script needs.
	{name: "two limits without ${limit}",
		mutate: func(p *v1alpha1.RateLimitPolicy) { twoWindows(p); layout(p, "{rl:${identity}}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`"{rl:${identity}}" must use ${limit}`, "with 2 limits"}},
	{name: "idempotency without ${requestId}",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "{rl:${namespace}/${policy}:${identity}}:idem", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{"must use ${requestId}"}},

	// A TTL must exist and cover the horizon.
	{name: "no TTL (not defaulted)", raw: true,
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, defaultState, "", 0) },
		field:  "spec.keyLayout.ttl", msgs: []string{"Required value", "a TTL is required"}},
	{name: "no key layout at all (not defaulted)", raw: true,
		mutate: func(*v1alpha1.RateLimitPolicy) {},
		field:  "spec.keyLayout.ttl", msgs: []string{"Required value"}, also: []string{"spec.keyLayout.state"}},
	{name: "FixedWindow TTL shorter than the window",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
			p.Spec.Limits = []v1alpha1.Limit{limit("per-minute", 100, time.Minute, 0)}
			layout(p, "", "", 59*time.Second)
		},
		field: "spec.keyLayout.ttl", msgs: []string{"59s is shorter than the FixedWindow horizon 1m0s", "use at least 1m0s"}},
	{name: "SlidingWindow TTL shorter than two windows",
		mutate: func(p *v1alpha1.RateLimitPolicy) { sliding(p); layout(p, "", "", time.Minute) },
		field:  "spec.keyLayout.ttl", msgs: []string{"1m0s is shorter than the SlidingWindow horizon 2m0s", "use at least 2m0s"}},
	{name: "TokenBucket TTL shorter than burst*period/requests",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "", "", time.Second) },
		field:  "spec.keyLayout.ttl", msgs: []string{"1s is shorter than the TokenBucket horizon 2s", "use at least 2s"}},
	{name: "GCRA TTL shorter than burst*period/requests",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
			p.Spec.Limits = []v1alpha1.Limit{limit("per-second", 5, time.Second, 10)}
			layout(p, "", "", 1999*time.Millisecond)
		},
		field: "spec.keyLayout.ttl", msgs: []string{"1.999s is shorter than the GCRA horizon 2s", "use at least 2s"}},
	{name: "TTL must cover the longest of several limits",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			twoWindows(p)
			p.Spec.Limits[1] = limit("per-hour", 1000, time.Hour, 0)
			layout(p, "", "", time.Minute)
		},
		field: "spec.keyLayout.ttl", msgs: []string{"horizon 1h0m0s", "use at least 1h0m0s"}},

	// Malformed templates.
	{name: "unknown variable",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${user}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`unknown variable "user" at offset 4`}},
	{name: "unclosed brace",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"unclosed '{' at offset 0"}},
	{name: "unbalanced closing brace",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "rl:${identity}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"unbalanced '}' at offset 14"}},
	{name: "nested braces",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:{${identity}}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"nested '{' at offset 4"}},
	{name: "dollar without braces ($x)",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}}:$x", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"'$' at offset 17 is not followed by '{'"}},
	{name: "empty variable name",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}}:${}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`empty variable name "${}"`}},
	{name: "unterminated variable",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:x}:${identity", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"unterminated variable", "missing '}'"}},
	{name: "request id in the state key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}}:${requestId}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`variable "requestId" at offset 17 is not allowed here`}},
	{name: "slot in the idempotency key",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "{rl:${namespace}/${policy}:${identity}}:${slot}:${requestId}", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{`variable "slot"`, "is not allowed here"}},

	// Untrusted values must be delimited.
	{name: "identity followed by a character other than ':' or '}'",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}-x}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"${identity} must be followed by ':' or '}' or end the key, not '-'"}},
	{name: "identity followed by a variable",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}${limit}}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"${identity} must be followed by ':' or '}'", "not '$'"}},
	{name: "request id followed by a character other than ':' or '}'",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}.v1", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{"${requestId} must be followed by ':' or '}' or end the key, not '.'"}},

	// Limits the scripts cannot run.
	{name: "period below 1ms",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Period.Duration = 500 * time.Microsecond },
		field:  "spec.limits[0].period", msgs: []string{"must be at least 1ms"}},
	{name: "period below 1ms on the second limit",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			twoWindows(p)
			p.Spec.Limits[1].Period.Duration = 0
		},
		field: "spec.limits[1].period", msgs: []string{"must be at least 1ms"}},
	{name: "zero requests",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Requests = 0 },
		field:  "spec.limits[0].requests", msgs: []string{"must be at least 1"}},
	{name: "cost max below cost default",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Cost = &v1alpha1.Cost{Default: 5, Max: ptr.To[int64](2)} },
		field:  "spec.cost.max", msgs: []string{"must be at least cost.default"}},
	{name: "GCRA faster than one request per microsecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
			p.Spec.Limits = []v1alpha1.Limit{limit("per-ms", 2000, time.Millisecond, 0)}
		},
		field: "spec.limits[0].requests", msgs: []string{"2000 per 1ms is more than one request per microsecond, the finest GCRA step"}},
	{name: "TokenBucket faster than one request per microsecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits = []v1alpha1.Limit{limit("per-second", 1000001, time.Second, 0)}
		},
		field: "spec.limits[0].requests", msgs: []string{"more than one request per microsecond", "TokenBucket"}},
	{name: "burst * period / requests beyond 142 years",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits = []v1alpha1.Limit{limit("per-year", 1, 8760*time.Hour, 1000000000)}
		},
		field: "spec.limits[0].burst", msgs: []string{"exceeds 142 years"}},
	{name: "no limits",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits = nil },
		field:  "spec.limits", msgs: []string{"1 to 8 limits, got 0"}},
	{name: "nine limits",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits = nil
			for _, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
				p.Spec.Limits = append(p.Spec.Limits, limit(n, 10, time.Second, 0))
			}
		},
		field: "spec.limits", msgs: []string{"1 to 8 limits, got 9"}},
	{name: "unknown algorithm",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.Algorithm = "LeakyBucket" },
		field:  "spec.algorithm", msgs: []string{"LeakyBucket"}},
	{name: "idempotency TTL below 1ms",
		mutate: func(p *v1alpha1.RateLimitPolicy) { idempotent(p); p.Spec.Idempotency.TTL.Duration = 0 },
		field:  "spec.idempotency.ttl", msgs: []string{"must be at least 1ms"}},

	// Durations are milliseconds end to end (the snapshot carries ms): a finer duration
	// would be published truncated (10 per 1.9ms ran as 10 per 1ms, +90%).
	{name: "period with a fraction of a millisecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
			p.Spec.Limits = []v1alpha1.Limit{limit("burst", 10, 1900*time.Microsecond, 0)}
		},
		field: "spec.limits[0].period", msgs: []string{"1.9ms is not a whole number of milliseconds"}},
	{name: "period that the sidecars would refuse once truncated (1200 per 1.5ms)",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits = []v1alpha1.Limit{limit("burst", 1200, 1500*time.Microsecond, 0)}
		},
		field: "spec.limits[0].period", msgs: []string{"not a whole number of milliseconds"}, also: []string{"spec.limits[0].requests"}},
	{name: "TTL with a fraction of a millisecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "", "", 2*time.Second+500*time.Microsecond) },
		field:  "spec.keyLayout.ttl", msgs: []string{"2.0005s is not a whole number of milliseconds"}},
	{name: "idempotency TTL with a fraction of a millisecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			p.Spec.Idempotency.TTL.Duration = time.Minute + time.Microsecond
		},
		field: "spec.idempotency.ttl", msgs: []string{"not a whole number of milliseconds"}},
	{name: "localCap period with a fraction of a millisecond",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.FailureMode = v1alpha1.FailureModeLocalCap
			p.Spec.LocalCap = &v1alpha1.LocalCap{Requests: 2, Period: metav1.Duration{Duration: time.Second + time.Microsecond}, MaxIdentities: 10}
		},
		field: "spec.localCap.period", msgs: []string{"not a whole number of milliseconds"}},
	{name: "TTL of zero (written by the user, not defaulted)",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.KeyLayout = &v1alpha1.KeyLayout{TTL: dur(0)} },
		field:  "spec.keyLayout.ttl", msgs: []string{"must be positive"}},
	{name: "rate that whole microseconds cannot run (700000 per second)",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits = []v1alpha1.Limit{limit("per-second", 700_000, time.Second, 0)}
		},
		field: "spec.limits[0].requests", msgs: []string{"700000 per 1s needs 1.429µs per request", "at most 500000 per 1s"}},
	{name: "duplicate limit names",
		raw: true,
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
			p.Spec.Limits = []v1alpha1.Limit{limit("a", 10, time.Second, 0), limit("a", 100, time.Minute, 0)}
			layout(p, defaultState, "", time.Hour)
		},
		field: "spec.limits[1].name", msgs: []string{`"a" is also the name of limits[0]`}},
	{name: "hash tag of the identity alone (empty for the Shared caller)",
		mutate: func(p *v1alpha1.RateLimitPolicy) { twoWindows(p); layout(p, "{${identity}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"expands to the empty tag {} when ${identity} is empty"}},

	// Key scope: every key of a policy lives under its namespace's prefix.
	{name: "another namespace's keys",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:victim/payments:${identity}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`"{rl:victim/payments:${identity}}:${limit}" must begin with "{rl:${namespace}/"`, "another namespace's keys"}},
	{name: "an application's own keys",
		mutate: func(p *v1alpha1.RateLimitPolicy) { layout(p, "app:session:${identity}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`must begin with "{rl:${namespace}/"`}},
	{name: "a constant key",
		mutate: func(p *v1alpha1.RateLimitPolicy) { fixedOnly(p); layout(p, "{rl:global}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{`must begin with "{rl:${namespace}/"`}},
	{name: "idempotency keys outside the scope",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			idempotent(p)
			layout(p, "", "{rl:victim/x:${identity}}:idem:${requestId}", 0)
		},
		field: "spec.keyLayout.idempotency", msgs: []string{`must begin with "{rl:${namespace}/"`}},

	// LocalCap needs its cap.
	{name: "LocalCap without localCap",
		mutate: func(p *v1alpha1.RateLimitPolicy) { p.Spec.FailureMode = v1alpha1.FailureModeLocalCap },
		field:  "spec.localCap", msgs: []string{"failureMode LocalCap needs localCap"}},
	{name: "LocalCap with zero requests",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.FailureMode = v1alpha1.FailureModeLocalCap
			p.Spec.LocalCap = &v1alpha1.LocalCap{Period: metav1.Duration{Duration: time.Second}, MaxIdentities: 100}
		},
		field: "spec.localCap", msgs: []string{"requests >= 1"}},

	// Keys of one call on several slots: a tag that varies within a call.
	{name: "${limit} inside the hash tag puts two limits on two slots",
		mutate: func(p *v1alpha1.RateLimitPolicy) { twoWindows(p); layout(p, "{rl:${identity}:${limit}}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"{rl:${identity}:${limit}}"}},
	{name: "${slot} inside the hash tag puts the two windows on two slots",
		mutate: func(p *v1alpha1.RateLimitPolicy) { sliding(p); layout(p, "{rl:${identity}:${slot}}:${limit}", "", 0) },
		field:  "spec.keyLayout.state", msgs: []string{"{rl:${identity}:${slot}}:${limit}"}},
	// Distinct (limit, identity) pairs must give distinct keys: otherwise identity "b1"
	// on limit "a" and identity "1" on limit "ab" share the key "{rl:shop}:ab1".
	{name: "identity right after ${limit} lets two callers share a counter",
		mutate: func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
			p.Spec.Limits = []v1alpha1.Limit{limit("a", 10, time.Second, 0), limit("ab", 10, time.Second, 0)}
			layout(p, "{rl:${namespace}}:${limit}${identity}", "", 0)
		},
		field: "spec.keyLayout.state", msgs: []string{"{rl:${namespace}}:${limit}${identity}"}},
}

// TestCompileRejects runs each broken policy through Default and Compile and checks the field
// path and message of the error that names the mistake.
func TestCompileRejects(t *testing.T) {
	for _, tc := range rejectCases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			if !tc.raw {
				(policy.Rules{}).Default(p)
			}
			compiled, errs := (policy.Rules{}).CompileAsIs(p)
			if compiled != nil && len(errs) == 0 {
				for _, k := range compiled.Keys("alice", "req-1") {
					t.Logf("accepted key for alice: %q on slot %d", k, keylayout.Slot(k))
				}
			}
			if compiled != nil && len(errs) > 0 {
				t.Errorf("Compile returned both a policy and errors")
			}
			assertErrors(t, errs, tc.field, tc.msgs, tc.also...)
		})
	}
}

// TestCompileReportsEveryProblem: one call reports all problems, each on its own path.
func TestCompileReportsEveryProblem(t *testing.T) {
	p := base()
	p.Spec.Limits = append(p.Spec.Limits, limit("per-minute", 0, time.Microsecond, 0))
	p.Spec.Cost = &v1alpha1.Cost{Default: 3, Max: ptr.To[int64](1)}
	p.Spec.FailureMode = v1alpha1.FailureModeLocalCap
	layout(p, "{rl:${user}}", "", 0)
	(policy.Rules{}).Default(p)
	_, errs := (policy.Rules{}).CompileAsIs(p)
	want := []string{"spec.limits[1].requests", "spec.cost.max", "spec.localCap", "spec.keyLayout.state"}
	got := map[string]bool{}
	for _, e := range errs {
		got[e.Field] = true
	}
	for _, f := range want {
		if !got[f] {
			t.Errorf("no error on %s; got:\n%s", f, list(errs))
		}
	}
}

// TestCompileReportsLayoutAndLimitProblemsTogether: a layout problem is reported together
// with a TTL or limit problem, so the user fixes both in one round.
func TestCompileReportsLayoutAndLimitProblemsTogether(t *testing.T) {
	for name, mutate := range map[string]func(p *v1alpha1.RateLimitPolicy){
		"TTL too short": func(p *v1alpha1.RateLimitPolicy) { layout(p, "{rl:${identity}}", "", time.Second) },
		"zero requests": func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Limits[1].Requests = 0
			layout(p, "{rl:${identity}}", "", 0)
		},
	} {
		t.Run(name, func(t *testing.T) {
			p := base()
			twoWindows(p)
			mutate(p)
			(policy.Rules{}).Default(p)
			_, errs := (policy.Rules{}).CompileAsIs(p)
			assertErrors(t, errs, "spec.keyLayout.state", []string{"must use ${limit}"}, "spec.keyLayout.ttl", "spec.limits[1].requests")
		})
	}
}

// TestCompileNoTTLReportedOnce: a missing TTL is reported as Required only, not also as
// shorter than the horizon.
func TestCompileNoTTLReportedOnce(t *testing.T) {
	p := base()
	layout(p, defaultState, "", 0)
	_, errs := (policy.Rules{}).CompileAsIs(p)
	if len(errs) != 1 || errs[0].Type != field.ErrorTypeRequired || errs[0].Field != "spec.keyLayout.ttl" {
		t.Fatalf("want exactly one Required error on spec.keyLayout.ttl, got:\n%s", list(errs))
	}
}

// acceptCase is a valid variation of the base policy.
type acceptCase struct {
	name   string
	mutate func(p *v1alpha1.RateLimitPolicy)
}

var acceptCases = []acceptCase{
	{"base", func(*v1alpha1.RateLimitPolicy) {}},
	{"leases On", func(p *v1alpha1.RateLimitPolicy) { p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn} }},
	{"leases Off", func(p *v1alpha1.RateLimitPolicy) { p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOff} }},
	{"global limit over 3 shards with leases", func(p *v1alpha1.RateLimitPolicy) {
		fixedOnly(p)
		p.Spec.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn, Shards: ptr.To[int32](3)}
	}},
	{"identity ending the key", func(p *v1alpha1.RateLimitPolicy) {
		layout(p, "{rl:${namespace}/${policy}}:${limit}:${identity}", "", 0)
	}},
	{"FixedWindow TTL exactly the window", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
		p.Spec.Limits = []v1alpha1.Limit{limit("per-minute", 100, time.Minute, 0)}
		layout(p, "", "", time.Minute)
	}},
	{"SlidingWindow TTL exactly two windows", func(p *v1alpha1.RateLimitPolicy) {
		sliding(p)
		layout(p, "{rl:${namespace}/${identity}}:${limit}:${slot}", "", 2*time.Minute)
	}},
	{"TokenBucket TTL exactly burst*period/requests", func(p *v1alpha1.RateLimitPolicy) { layout(p, "", "", 2*time.Second) }},
	{"GCRA TTL exactly burst*period/requests", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
		p.Spec.Limits = []v1alpha1.Limit{limit("per-second", 5, time.Second, 10)}
		layout(p, "", "", 2*time.Second)
	}},
	{"GCRA at exactly one request per microsecond", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Algorithm = v1alpha1.AlgorithmGCRA
		p.Spec.Limits = []v1alpha1.Limit{limit("per-ms", 1000, time.Millisecond, 0)}
	}},
	{"period of exactly 1ms", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Limits = []v1alpha1.Limit{limit("per-ms", 1, time.Millisecond, 0)}
	}},
	{"eight limits", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Algorithm = v1alpha1.AlgorithmFixedWindow
		p.Spec.Limits = nil
		for i, n := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
			p.Spec.Limits = append(p.Spec.Limits, limit(n, 10, time.Duration(i+1)*time.Second, 0))
		}
	}},
	{"idempotency with the default layout", idempotent},
	{"custom tag shared by state and idempotency keys", func(p *v1alpha1.RateLimitPolicy) {
		idempotent(p)
		layout(p, "{rl:${namespace}/t:${identity}}:${limit}", "{rl:${namespace}/t:${identity}}:${requestId}", 0)
	}},
	{"global limit with a Fixed identity and a tag without ${identity}", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
		layout(p, "{rl:${namespace}/${policy}}:${limit}", "", 0)
	}},
	{"cost max equal to cost default", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Cost = &v1alpha1.Cost{Default: 2, Header: "X-Cost", Max: ptr.To[int64](2)}
	}},
	{"LocalCap with its cap", func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.FailureMode = v1alpha1.FailureModeLocalCap
		p.Spec.LocalCap = &v1alpha1.LocalCap{Requests: 2, Period: metav1.Duration{Duration: time.Minute}, MaxIdentities: 1000}
	}},
	{"FailClosed", func(p *v1alpha1.RateLimitPolicy) { p.Spec.FailureMode = v1alpha1.FailureModeFailClosed }},
	{"failure mode unset (the schema defaults it)", func(p *v1alpha1.RateLimitPolicy) { p.Spec.FailureMode = "" }},
	{"a longer TTL than needed", func(p *v1alpha1.RateLimitPolicy) { layout(p, "", "", 24*time.Hour) }},
}

// TestCompileAccepts compiles valid variations and checks that every key of one call lands on
// one Cluster slot, which is what the layout rules exist for.
func TestCompileAccepts(t *testing.T) {
	for _, tc := range acceptCases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mutate(p)
			(policy.Rules{}).Default(p)
			compileOK(t, p)
		})
	}
}

// TestSamplesCompile: every sample under config/samples defaults and compiles, and draws no
// warning (samples are meant to be copied).
func TestSamplesCompile(t *testing.T) {
	for file, p := range samples(t) {
		t.Run(file, func(t *testing.T) {
			(policy.Rules{}).Default(p)
			compileOK(t, p)
			if w := policy.Warnings(nil, p); len(w) > 0 {
				t.Errorf("sample draws warnings: %q", w)
			}
		})
	}
}

// compileOK compiles p, failing on any error, and checks that the keys of one call (every
// limit and slot, plus the idempotency key) share one Cluster slot.
func compileOK(t *testing.T, p *v1alpha1.RateLimitPolicy) *limiter.Policy {
	t.Helper()
	compiled, errs := (policy.Rules{}).CompileAsIs(p)
	if len(errs) > 0 || compiled == nil {
		t.Fatalf("refused a valid policy:\n%s", list(errs))
	}
	for _, identity := range []string{"alice", "bob:{x}"} {
		keys := compiled.Keys(identity, "req-1")
		want := len(p.Spec.Limits)
		if p.Spec.Idempotency != nil {
			want++
		}
		if len(keys) != want {
			t.Fatalf("%d keys for %q, want %d: %q", len(keys), identity, want, keys)
		}
		for _, k := range keys[1:] {
			if keylayout.Slot(k) != keylayout.Slot(keys[0]) {
				t.Errorf("keys of one call on several slots: %q (%d) and %q (%d)", keys[0], keylayout.Slot(keys[0]), k, keylayout.Slot(k))
			}
		}
		if len(keys) > 1 && !strings.Contains(keys[0], "{") {
			t.Errorf("multi-key call without a hash tag: %q", keys)
		}
	}
	return compiled
}

// TestRoundTrip: for every policy Build accepts, the entry as published (through its JSON,
// as the ConfigMap carries it) compiles, the way each sidecar compiles it, to exactly what a
// direct conversion of the API object asks for: nothing is lost, rounded or defaulted
// differently on the way from kubectl apply to the limiter.
func TestRoundTrip(t *testing.T) {
	for name, p := range accepted(t) {
		t.Run(name, func(t *testing.T) {
			built, errs := (policy.Rules{}).Compile(p)
			if len(errs) > 0 {
				t.Fatalf("refused: %v", errs.ToAggregate())
			}
			b, err := json.Marshal(built.Entry)
			if err != nil {
				t.Fatal(err)
			}
			var published snapshot.Entry
			if err := json.Unmarshal(b, &published); err != nil {
				t.Fatal(err)
			}
			compiled, err := limiterspec.Compile(p.Namespace, published, false)
			if err != nil {
				t.Fatalf("the published entry does not compile: %v", err)
			}
			(policy.Rules{}).Default(p)
			if want := directConfig(p); !reflect.DeepEqual(compiled.Spec, want) {
				t.Fatalf("published entry compiles to\n%+v\nthe API object asks for\n%+v", compiled.Spec, want)
			}
		})
	}
}

// directConfig is the limiter's view of a defaulted API object, converted field by field
// without the snapshot: the reference the round trip is held to.
func directConfig(p *v1alpha1.RateLimitPolicy) limiter.Spec {
	s := &p.Spec
	c := limiter.Spec{Namespace: p.Namespace, Name: p.Name, Algorithm: limiter.Algorithm(s.Algorithm),
		FailureMode: limiter.FailureMode(s.FailureMode), StateKey: s.KeyLayout.State, TTL: s.KeyLayout.TTL.Duration}
	if c.FailureMode == "" {
		c.FailureMode = limiter.FailOpen
	}
	if hk := s.HotKeys; hk != nil {
		c.Leases = hk.Leases == v1alpha1.LeaseModeOn
		if hk.Shards != nil && *hk.Shards > 1 {
			c.Shards = int(*hk.Shards)
		}
	}
	for _, l := range s.Limits {
		ll := limiter.Limit{Name: l.Name, Requests: l.Requests, Period: l.Period.Duration}
		if l.Burst != nil {
			ll.Burst = *l.Burst
		}
		c.Limits = append(c.Limits, ll)
	}
	if id := s.Idempotency; id != nil {
		c.IdempotencyKey, c.IdempotencyTTL = s.KeyLayout.Idempotency, id.TTL.Duration
		c.IdempotencyMaxReplays = int(id.MaxReplays)
		if c.IdempotencyMaxReplays == 0 {
			c.IdempotencyMaxReplays = limiter.DefaultMaxReplays
		}
	}
	if lc := s.LocalCap; lc != nil {
		c.LocalCap = &limiter.LocalCapConfig{Requests: lc.Requests, Period: lc.Period.Duration, MaxIdentities: int(lc.MaxIdentities)}
	}
	return c
}

func fixedOnly(p *v1alpha1.RateLimitPolicy) {
	p.Spec.Identity.Sources = []v1alpha1.IdentitySource{{Type: v1alpha1.IdentityFixed, Fixed: &v1alpha1.FixedSource{Value: "all"}}}
}

// TestRulesKeyPrefix: an installation's key prefix scopes the default layout and the rule:
// under "acme:" the default keys begin with "{acme:<namespace>/", and a layout written for
// the default prefix is out of scope.
func TestRulesKeyPrefix(t *testing.T) {
	r := policy.Rules{KeyPrefix: "acme:"}
	p := base()
	r.Default(p)
	compiled, errs := r.CompileAsIs(p)
	if len(errs) > 0 {
		t.Fatalf("defaulted under acme: %v", errs.ToAggregate())
	}
	if k := compiled.Keys("alice", "")[0]; !strings.HasPrefix(k, "{acme:"+p.Namespace+"/") {
		t.Errorf("default key %q does not begin with {acme:%s/", k, p.Namespace)
	}
	q := base()
	layout(q, defaultState, "", 0)
	r.Default(q)
	_, errs = r.CompileAsIs(q)
	assertErrors(t, errs, "spec.keyLayout.state", []string{`must begin with "{acme:${namespace}/"`})
}
