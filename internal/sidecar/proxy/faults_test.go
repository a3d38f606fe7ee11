package proxy_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestReloadUnderLoad changes a policy 50 times while 8 clients send requests through the
// proxy: no request may fail, and the last version must be in force at the end.
func TestReloadUnderLoad(t *testing.T) {
	big := func(n int64) *v1alpha1.RateLimitPolicy { return sidecartest.Policy("orders", n) }
	extra := sidecartest.Policy("extra", 1000000)
	rig := sidecartest.Start(t, limiter.Options{Pipelining: true}, big(1000000))
	p := newProxyRig(t, rig)
	ctx, cancel := context.WithCancel(t.Context())
	var sent, failed atomic.Int64
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, p.url+"/api/orders/x", nil)
				req.Header.Set("X-API-Key", fmt.Sprintf("c%d-%d", c, i%50))
				resp, err := http.DefaultClient.Do(req)
				sent.Add(1)
				if err != nil || resp.StatusCode != http.StatusOK {
					failed.Add(1)
				}
				if err == nil {
					_ = resp.Body.Close()
				}
			}
		})
	}
	var last string
	for i := range 50 {
		policies := []*v1alpha1.RateLimitPolicy{big(int64(1000000 + i))}
		if i%2 == 0 {
			policies = append(policies, extra)
		}
		if err := rig.Store.Load(sidecartest.Doc(t, policies...), "test"); err != nil {
			t.Fatal(err)
		}
		last = rig.Store.Current().Version
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	if sent.Load() < 100 || failed.Load() != 0 {
		t.Fatalf("%d requests, %d failed during 50 reloads; want at least 100 and none failed", sent.Load(), failed.Load())
	}
	if got := rig.Store.Current(); got.Version != last || got.Rule("orders").Entry.Limits[0].Requests != 1000049 {
		t.Errorf("in force: %s, want the last loaded %s", got.Version, last)
	}
	t.Logf("%d requests through 50 reloads, 0 failed", sent.Load())
}

// TestRedisKilledFailureModes kills Redis under load: FailOpen admits, FailClosed denies,
// LocalCap admits its cap per identity; all answer well within a second; after a restart
// Redis decides again without restarting anything.
func TestRedisKilledFailureModes(t *testing.T) {
	mode := func(m v1alpha1.FailureMode) func(*v1alpha1.RateLimitPolicySpec) {
		return func(s *v1alpha1.RateLimitPolicySpec) {
			s.FailureMode = m
			if m == v1alpha1.FailureModeLocalCap {
				s.LocalCap = &v1alpha1.LocalCap{Requests: 3, Period: metav1.Duration{Duration: time.Minute}, MaxIdentities: 100}
			}
		}
	}
	rig := sidecartest.Start(t, limiter.Options{Timeout: 50 * time.Millisecond},
		sidecartest.Policy("open", 1000, mode(v1alpha1.FailureModeFailOpen)),
		sidecartest.Policy("closed", 1000, mode(v1alpha1.FailureModeFailClosed)),
		sidecartest.Policy("capped", 1000, mode(v1alpha1.FailureModeLocalCap)))
	p := newProxyRig(t, rig)
	if resp, _ := p.get(t, "/api/closed", "X-API-Key", "warm"); resp.StatusCode != 200 {
		t.Fatalf("before the kill: %d", resp.StatusCode)
	}
	rig.Redis.Kill()
	want := map[string][]int{"open": {200, 200, 200, 200, 200}, "closed": {429, 429, 429, 429, 429}, "capped": {200, 200, 200, 429, 429}}
	var mu sync.Mutex
	var slowest time.Duration
	for policy, codes := range want {
		var wg sync.WaitGroup
		got := make([]int, len(codes))
		for id := range 4 {
			wg.Go(func() {
				for i := range codes {
					start := time.Now()
					resp, _ := p.get(t, "/api/"+policy, "X-API-Key", fmt.Sprint("id", id))
					mu.Lock()
					slowest = max(slowest, time.Since(start))
					mu.Unlock()
					if id == 0 {
						got[i] = resp.StatusCode
					}
				}
			})
		}
		wg.Wait()
		if fmt.Sprint(got) != fmt.Sprint(codes) {
			t.Errorf("%s with Redis down: %v, want %v", policy, got, codes)
		}
	}
	if slowest > time.Second {
		t.Errorf("slowest answer with Redis down took %v", slowest)
	}
	if n := sidecartest.MetricValue(t, rig.Reg, "ratelimit_sidecar_decisions_without_redis_total", map[string]string{"failure_mode": "FailClosed"}); n < 20 {
		t.Errorf("decisions without redis (FailClosed) = %v, want 20", n)
	}
	rig.Redis.Restart(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, _ := p.get(t, "/api/closed", "X-API-Key", "after")
		if resp.StatusCode == 200 && resp.Header.Get("RateLimit") != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis back but checks still fail: %d %v", resp.StatusCode, resp.Header)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
