package adversarial

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
)

// Class: memory a client controls (issue 13, item 8). The deny cache and LocalCap kept the
// raw identity: 100 KiB identities times the default 10,000 entries is about 1 GB of a
// sidecar's memory, chosen by its callers. Measured here through the engine, on real Redis
// and with Redis killed: what the heap keeps per caller is bounded by a constant.
const (
	callers     = 1500
	identityLen = 60 << 10
	perCaller   = 2048 // bytes one caller may keep alive in the sidecar
)

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// hugeID is a distinct identity of identityLen bytes, allocated on its own.
func hugeID(i int) string { return fmt.Sprintf("%06d", i) + strings.Repeat("k", identityLen-6) }

// decideAll checks one request per caller against policy name and reports the heap kept.
func decideAll(t *testing.T, r *rig, name string, times int) int64 {
	t.Helper()
	e := r.store.Current().Rule(name)
	before := liveHeap()
	for i := range callers {
		for range times {
			r.engine.Decide(context.Background(), httpcheck.FrontName, e, engine.Check{Identity: hugeID(i), HasIdentity: true, Cost: 1})
		}
	}
	kept := liveHeap() - before
	t.Logf("%s: %d callers with %d-byte identities keep %d bytes (%d each)", name, callers, identityLen, kept, kept/callers)
	return kept
}

func TestHugeIdentitiesKeepBoundedMemory(t *testing.T) {
	local := newPolicy("local", v1alpha1.AlgorithmGCRA, 1, time.Hour, func(s *v1alpha1.RateLimitPolicySpec) {
		s.FailureMode = v1alpha1.FailureModeLocalCap
		s.LocalCap = &v1alpha1.LocalCap{Requests: 1, Period: metav1.Duration{Duration: time.Hour}, MaxIdentities: callers}
	})
	r := newRig(t, limiter.Options{DenyCacheSize: callers, Timeout: 500 * time.Millisecond}, newPolicy("deny", v1alpha1.AlgorithmGCRA, 1, time.Hour), local)
	// Each caller is admitted once and denied once: the denial is cached.
	if kept := decideAll(t, r, "deny", 2); kept > callers*perCaller {
		t.Errorf("deny cache: %d bytes kept for %d callers, more than %d each", kept, callers, perCaller)
	}
	r.redis.Kill()
	if kept := decideAll(t, r, "local", 1); kept > callers*perCaller {
		t.Errorf("LocalCap while Redis is away: %d bytes kept for %d callers, more than %d each", kept, callers, perCaller)
	}
}
