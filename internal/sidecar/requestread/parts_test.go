package requestread_test

import (
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

var (
	keyHeader = v1alpha1.IdentitySource{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-API-Key"}}
	tenantHdr = v1alpha1.IdentitySource{Type: v1alpha1.IdentityHeader, Header: &v1alpha1.HeaderSource{Name: "X-Tenant"}}
)

// TestCompositeIdentityMissingPart: a part with no value is onMissing's to judge. Shared
// counts it as one value of its own, which no real value can spell, and the other parts
// still count apart; Reject and Skip leave the request without identity, so the engine
// rejects or skips it.
func TestCompositeIdentityMissingPart(t *testing.T) {
	parts := []v1alpha1.IdentityPart{sidecartest.Part(keyHeader), sidecartest.Part(tenantHdr)}
	set := sidecartest.Set(t,
		sidecartest.Policy("shared", 5, sidecartest.Parts(v1alpha1.MissingIdentityShared, parts...)),
		sidecartest.Policy("reject", 5, sidecartest.Parts(v1alpha1.MissingIdentityReject, parts...)),
		sidecartest.Policy("skip", 5, sidecartest.Parts(v1alpha1.MissingIdentitySkip, parts...)),
	)
	for _, tc := range []struct {
		policy string
		h      http.Header
		want   string
		ok     bool
	}{
		{"shared", sidecartest.Header("X-API-Key", "k", "X-Tenant", "t"), "1.k+1.t", true},
		{"shared", sidecartest.Header("X-API-Key", "k"), "1.k+-", true},
		{"shared", sidecartest.Header("X-Tenant", "t"), "-+1.t", true},
		{"shared", sidecartest.Header("X-API-Key", "k", "X-Tenant", "-"), "1.k+1.-", true}, // a value "-" is not a missing part
		{"shared", sidecartest.Header(), "-+-", true},
		{"reject", sidecartest.Header("X-API-Key", "k", "X-Tenant", "t"), "1.k+1.t", true},
		{"reject", sidecartest.Header("X-API-Key", "k"), "", false},
		{"skip", sidecartest.Header("X-Tenant", "t"), "", false},
		{"skip", sidecartest.Header(), "", false},
	} {
		got, ok, err := requestread.HTTPIdentity(&set.Rule(tc.policy).Entry, tc.h, "", nil, nil)
		if got != tc.want || ok != tc.ok || err != nil {
			t.Errorf("%s %v: %q, %v, %v; want %q, %v", tc.policy, tc.h, got, ok, err, tc.want, tc.ok)
		}
	}
	// Every part is read, so a header sent twice refuses the request even after a part is missing.
	if _, _, err := requestread.HTTPIdentity(&set.Rule("reject").Entry, sidecartest.Header("X-Tenant", "a", "X-Tenant", "b"), "", nil, nil); err == nil || !strings.Contains(err.Error(), "X-Tenant") {
		t.Errorf("a repeated header in the second part: %v, want ErrRepeatedHeader naming it", err)
	}
}

// TestCompositeIdentityIsInjective: no two combinations of values share an identity,
// whatever separators, digits and "missing" markers the values hold. Values are drawn from
// an alphabet of nothing but the encoding's own bytes, so every boundary is contested.
func TestCompositeIdentityIsInjective(t *testing.T) {
	set := sidecartest.Set(t,
		sidecartest.Policy("two", 5, sidecartest.Parts(v1alpha1.MissingIdentityShared, sidecartest.Part(keyHeader), sidecartest.Part(tenantHdr))),
		sidecartest.Policy("chains", 5, sidecartest.Parts(v1alpha1.MissingIdentityShared, sidecartest.Part(keyHeader, tenantHdr), sidecartest.Part(tenantHdr, keyHeader))),
	)
	const alphabet = "+.-=019"
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() string {
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		return string(b)
	}
	for _, policy := range []string{"two", "chains"} {
		seen := map[string][2]string{}
		for range 20000 {
			combo := [2]string{value(), value()}
			h := http.Header{}
			if combo[0] != "" {
				h.Set("X-API-Key", combo[0])
			}
			if combo[1] != "" {
				h.Set("X-Tenant", combo[1])
			}
			id, ok, err := requestread.HTTPIdentity(&set.Rule(policy).Entry, h, "", nil, nil)
			if err != nil || !ok || id == "" {
				t.Fatalf("%s %q: %q, %v, %v", policy, combo, id, ok, err)
			}
			if prev, dup := seen[id]; dup && prev != combo {
				t.Fatalf("%s: %q and %q are both identity %q", policy, prev, combo, id)
			}
			seen[id] = combo
		}
		if len(seen) < 1000 {
			t.Fatalf("%s: only %d distinct combinations drawn: the test proves little", policy, len(seen))
		}
	}
}
