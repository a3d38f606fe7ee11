package engine_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestPipelineMetrics exports what the limiter's pipelines carried: every check of 32
// concurrent callers, in fewer round trips than checks.
func TestPipelineMetrics(t *testing.T) {
	rig := sidecartest.Start(t, limiter.Options{Pipelining: true}, sidecartest.Policy("orders", 1000000))
	e := rig.Store.Current().Rule("orders")
	const callers, each = 32, 20
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				c := engine.Check{Identity: fmt.Sprintf("k%d-%d", g, i), HasIdentity: true, Cost: 1}
				if o := rig.Engine.Decide(t.Context(), "test", e, c); !o.Decision.Allowed || o.Decision.WithoutRedis() {
					t.Errorf("check %d/%d: %+v, want admitted by Redis", g, i, o.Decision)
				}
			}
		})
	}
	wg.Wait()
	checks := counter(t, rig.Reg, "ratelimit_sidecar_redis_pipelined_checks_total")
	pipelines := counter(t, rig.Reg, "ratelimit_sidecar_redis_pipelines_total")
	if checks != callers*each || pipelines < 1 || pipelines > checks {
		t.Errorf("%v checks in %v pipelines; want %d checks in at least one and at most as many pipelines", checks, pipelines, callers*each)
	}
}

// counter is the value of the unlabelled counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	if series := sidecartest.Family(t, reg, name).GetMetric(); len(series) == 1 {
		return series[0].GetCounter().GetValue()
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// TestRedisErrorKindMetrics exports why Redis did not decide: a check whose keys its Redis
// user may not touch (NOPERM, the policy's own fault) is counted as kind "call", and never
// as a node fault.
func TestRedisErrorKindMetrics(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := srv.Client()
	if err := admin.Do(t.Context(), "ACL", "SETUSER", "fenced", "on", ">pw", "~{elsewhere:*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	o := srv.Options()
	o.ContextTimeoutEnabled, o.Username, o.Password = true, "fenced", "pw"
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	rig := sidecartest.StartOn(t, srv, rdb, limiter.Options{}, sidecartest.Policy("orders", 10))
	e := rig.Store.Current().Rule("orders")
	for i := range 8 {
		if o := rig.Engine.Decide(t.Context(), "test", e, engine.Check{Identity: "k", HasIdentity: true, Cost: 1}); !o.Decision.WithoutRedis() {
			t.Fatalf("check %d decided by Redis; want NOPERM answered by the failure mode", i)
		}
	}
	kinds := map[string]float64{}
	for _, m := range sidecartest.Family(t, rig.Reg, "ratelimit_sidecar_redis_check_errors_total").GetMetric() {
		kinds[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if kinds["call"] != 8 || kinds["node"] != 0 || kinds["circuit_open"] != 0 {
		t.Errorf("ratelimit_sidecar_redis_check_errors_total by kind %v: want call 8, node 0, circuit_open 0", kinds)
	}
}

// TestDecisionLimitLabel labels each decision with the limit that decided it: the tightest
// limit on an admission, the denying one on a denial (from Redis or the deny cache), and
// none ("") when no limit decided: a skipped request, or a failure mode without Redis.
func TestDecisionLimitLabel(t *testing.T) {
	twoLimits := func(s *v1alpha1.RateLimitPolicySpec) {
		s.Limits = []v1alpha1.Limit{
			{Name: "per-minute", Requests: 2, Period: metav1.Duration{Duration: time.Minute}},
			{Name: "per-hour", Requests: 100, Period: metav1.Duration{Duration: time.Hour}},
		}
		s.Identity.OnMissing = v1alpha1.MissingIdentitySkip
	}
	rig := sidecartest.Start(t, limiter.Options{DenyCacheSize: 16}, sidecartest.Policy("orders", 0, twoLimits))
	e := rig.Store.Current().Rule("orders")
	decide := func(c engine.Check) engine.Outcome { return rig.Engine.Decide(t.Context(), "test", e, c) }
	alice := engine.Check{Identity: "alice", HasIdentity: true, Cost: 1}
	for i := range 4 { // 2 admitted, then denied by Redis, then by the deny cache
		o := decide(alice)
		if o.Allowed != (i < 2) {
			t.Fatalf("check %d: allowed %v", i, o.Allowed)
		}
	}
	decide(engine.Check{Cost: 1}) // no identity: skipped

	value := func(labels map[string]string) float64 {
		return sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", labels)
	}
	for _, c := range []struct {
		result, source, limit string
		want                  float64
	}{
		{"allowed", "Redis", "per-minute", 2},
		{"denied", "Redis", "per-minute", 1},
		{"denied", "DenyCache", "per-minute", 1},
		{"skipped", "none", "", 1},
	} {
		if got := value(map[string]string{"result": c.result, "source": c.source, "limit": c.limit}); got != c.want {
			t.Errorf("decisions{result=%q,source=%q,limit=%q} = %v, want %v", c.result, c.source, c.limit, got, c.want)
		}
	}
	if got := value(map[string]string{"limit": "per-hour"}); got != 0 {
		t.Errorf("decisions{limit=per-hour} = %v: the looser limit decided nothing", got)
	}

	// Without Redis, the failure mode decides and no limit does.
	rig.Redis.Stop()
	if o := decide(engine.Check{Identity: "bob", HasIdentity: true, Cost: 1}); !o.Decision.WithoutRedis() {
		t.Fatalf("with Redis stopped: %+v, want a failure-mode decision", o.Decision)
	}
	if got := value(map[string]string{"source": "FailOpen", "limit": ""}); got != 1 {
		t.Errorf(`decisions{source="FailOpen",limit=""} = %v, want 1`, got)
	}
}

// TestLeaseMetrics: a hot identity of a policy with leases is answered from leases, and the
// metrics say so per policy: decisions by source Lease beside Redis, and the lease calls.
func TestLeaseMetrics(t *testing.T) {
	leases := func(s *v1alpha1.RateLimitPolicySpec) { s.HotKeys = &v1alpha1.HotKeys{Leases: v1alpha1.LeaseModeOn} }
	rig := sidecartest.Start(t, limiter.Options{}, sidecartest.Policy("hot", 1000000, leases))
	e := rig.Store.Current().Rule("hot")
	for i := range 200 {
		c := engine.Check{Identity: "celebrity", HasIdentity: true, Cost: 1}
		if o := rig.Engine.Decide(t.Context(), "test", e, c); !o.Allowed || o.Decision.WithoutRedis() {
			t.Fatalf("check %d: %+v, want admitted", i, o.Decision)
		}
	}
	leased := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "hot", "source": "Lease"})
	byRedis := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_total", map[string]string{"policy": "hot", "source": "Redis"})
	calls := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_lease_units", map[string]string{"policy": "hot"})
	t.Logf("%v leased, %v by Redis, %v lease calls", leased, byRedis, calls)
	if leased < 100 || calls < 1 || calls > leased {
		t.Errorf("%v decisions from leases in %v lease calls (%v by Redis); want most of 200 from a few leases", leased, calls, byRedis)
	}
	if n := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_redis_errors_total", nil); n != 0 {
		t.Errorf("%v leased decisions counted as Redis errors", n)
	}
	if r := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_hot_identity_checks_per_second", map[string]string{"policy": "hot", "identity_hash": engine.IdentityHash("celebrity")}); r < 50 {
		t.Errorf("hot identity gauge %v for celebrity, want its rate (at least the 50/s that makes it hot)", r)
	}
	// The identity is often a credential: no label of any series may carry it.
	sum := sha256.Sum256([]byte("celebrity"))
	if got, want := engine.IdentityHash("celebrity"), hex.EncodeToString(sum[:8]); got != want {
		t.Errorf("identity hash %q, want %q", got, want)
	}
	labelsNever(t, rig.Reg, "celebrity")
	// Many hot identities: the list stays bounded.
	for i := range 3 * engine.HotTopN {
		for range 20 {
			rig.Engine.Decide(t.Context(), "test", e, engine.Check{Identity: fmt.Sprintf("tenant-%d", i), HasIdentity: true, Cost: 1})
		}
	}
	labelsNever(t, rig.Reg, "tenant-")
	if n := seriesOf(t, rig.Reg, "ratelimit_sidecar_hot_identity_checks_per_second"); n != engine.HotTopN {
		t.Errorf("%d hot identity series with %d hot identities, want the top %d", n, 3*engine.HotTopN+1, engine.HotTopN)
	}
}

// labelsNever fails the test when any label value of any series in reg contains s.
func labelsNever(t *testing.T, reg *prometheus.Registry, s string) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(l.GetValue(), s) {
					t.Errorf("%s{%s=%q}: the metrics expose the identity", f.GetName(), l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// seriesOf counts the series of name in reg.
func seriesOf(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	return len(sidecartest.Family(t, reg, name).GetMetric())
}
