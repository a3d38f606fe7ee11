package sidecartest

import (
	"net/http"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
)

// Part is a composite identity's part reading the sources, in order.
func Part(sources ...v1alpha1.IdentitySource) v1alpha1.IdentityPart {
	return v1alpha1.IdentityPart{Sources: sources}
}

// Parts makes a policy's identity the composite of parts, with onMissing m (a Policy edit).
func Parts(m v1alpha1.MissingIdentityAction, parts ...v1alpha1.IdentityPart) func(*v1alpha1.RateLimitPolicySpec) {
	return func(s *v1alpha1.RateLimitPolicySpec) {
		s.Identity = v1alpha1.Identity{Parts: parts, OnMissing: m}
	}
}

// Header is a request header of the key/value pairs kv, a key given twice sent twice.
func Header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}
