package gatewayapi

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"hash"
	"sort"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/attachment"
)

// resolutions keeps each namespace's last attachment resolution with a fingerprint of what
// it was resolved from, so the resolution is computed once per state of the namespace (a
// burst's round), not once per policy reconcile and snapshot sync: a burst of N attached
// policies in a namespace otherwise resolves N policies N times.
type resolutions struct {
	mu   sync.Mutex
	byNS map[string]resolution
}

type resolution struct {
	fingerprint [sha256.Size]byte
	results     map[string]*attachment.Result
}

// get returns the namespace's resolution if it was computed from the inputs fp describes.
func (m *resolutions) get(ns string, fp [sha256.Size]byte) (map[string]*attachment.Result, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.byNS[ns]
	if !ok || r.fingerprint != fp {
		return nil, false
	}
	return r.results, true
}

// put records the namespace's resolution; nil results (no policy attached) drop it.
func (m *resolutions) put(ns string, fp [sha256.Size]byte, results map[string]*attachment.Result) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if results == nil {
		delete(m.byNS, ns)
		return
	}
	if m.byNS == nil {
		m.byNS = map[string]resolution{}
	}
	m.byNS[ns] = resolution{fingerprint: fp, results: results}
}

// fingerprint identifies everything attachment.Resolve reads: each policy's, route's and
// Gateway's identity and generation (their specs; creation time orders policies), whether a
// policy is being deleted, and why Gateway API is not served. An object never stored (no
// generation, as in tests) counts with its whole spec.
func fingerprint(in attachment.Inputs, policies []v1alpha1.RateLimitPolicy) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(in.Namespace + "\x00" + in.Unserved + "\x00"))
	ps := make([]*v1alpha1.RateLimitPolicy, len(policies))
	for i := range policies {
		ps[i] = &policies[i]
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	for _, p := range ps {
		writeObject(h, "policy", &p.ObjectMeta, p.Spec)
		h.Write([]byte{boolByte(!p.DeletionTimestamp.IsZero())})
	}
	for i := range in.Gateways {
		writeObject(h, "gateway", &in.Gateways[i].ObjectMeta, in.Gateways[i].Spec)
	}
	for i := range in.HTTPRoutes {
		writeObject(h, "httproute", &in.HTTPRoutes[i].ObjectMeta, in.HTTPRoutes[i].Spec)
	}
	for i := range in.GRPCRoutes {
		writeObject(h, "grpcroute", &in.GRPCRoutes[i].ObjectMeta, in.GRPCRoutes[i].Spec)
	}
	var fp [sha256.Size]byte
	copy(fp[:], h.Sum(nil))
	return fp
}

// writeObject adds one object to h: kind, namespace, name, UID, creation time, generation,
// and the spec when there is no generation.
func writeObject(h hash.Hash, kind string, m *metav1.ObjectMeta, spec any) {
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00", kind, m.Namespace, m.Name, m.UID,
		m.CreationTimestamp.UnixNano(), m.Generation)
	if m.Generation == 0 {
		b, _ := json.Marshal(spec) //nolint:errchkjson // plain data, cannot fail
		h.Write(b)
	}
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
