package policy

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// checkShards holds a sharded global limit to what makes it one: every identity source
// Fixed, Method or PathPrefix (a budget shared by all callers, or by all callers of a method
// or route; sharding per-caller identities would multiply keys for nothing), and
// ${identity} inside the hash tag, which is what puts each shard on its own tag.
func checkShards(s *v1alpha1.RateLimitPolicySpec) field.ErrorList {
	hk := s.HotKeys
	if hk == nil || hk.Shards == nil || *hk.Shards <= 1 {
		return nil
	}
	path := specPath.Child("hotKeys", "shards")
	var errs field.ErrorList
	if !callerIndependent(s.Identity) {
		errs = append(errs, field.Invalid(path, *hk.Shards,
			"shards are for a global limit: every identity source must be Fixed, Method or PathPrefix, in sources and in every part (per-caller identities already spread over the Cluster)"))
	}
	if kl := s.KeyLayout; kl != nil && kl.State != "" {
		if t, err := keylayout.Parse(kl.State); err == nil {
			if tag, ok := t.HashTag(); !ok || !strings.Contains(tag, "${"+keylayout.VarIdentity+"}") {
				errs = append(errs, field.Invalid(path, *hk.Shards,
					"the state key's hash tag must contain ${identity}: each shard is the identity with a shard suffix, and only inside the tag does that move it to another slot"))
			}
		}
	}
	return errs
}
