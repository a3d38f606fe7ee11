package sidecar_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar"
)

// TestPipelineMetrics exports what the limiter's pipelines carried: every check of 32
// concurrent callers, in fewer round trips than checks.
func TestPipelineMetrics(t *testing.T) {
	rig := scStart(t, limiter.Options{Pipelining: true}, scPolicy("orders", 1000000))
	e := rig.store.Current().Policy("orders")
	const callers, each = 32, 20
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := range each {
				c := sidecar.Check{Identity: fmt.Sprintf("k%d-%d", g, i), HasIdentity: true, Cost: 1}
				if o := rig.engine.Decide(t.Context(), "test", e, c); !o.Decision.Allowed || o.Decision.WithoutRedis() {
					t.Errorf("check %d/%d: %+v, want admitted by Redis", g, i, o.Decision)
				}
			}
		})
	}
	wg.Wait()
	checks := counter(t, rig.reg, "ratelimit_sidecar_redis_pipelined_checks_total")
	pipelines := counter(t, rig.reg, "ratelimit_sidecar_redis_pipelines_total")
	if checks != callers*each || pipelines < 1 || pipelines > checks {
		t.Errorf("%v checks in %v pipelines; want %d checks in at least one and at most as many pipelines", checks, pipelines, callers*each)
	}
}

// counter is the value of the unlabelled counter name in reg.
func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}
