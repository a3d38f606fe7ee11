package policy

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
)

// sensitivePath matches paths where admitting everything while Redis is down is a security
// decision: logins, tokens, passwords, payments.
var sensitivePath = regexp.MustCompile(`(?i)(login|logon|signin|sign-in|auth|token|password|passwd|otp|2fa|mfa|payment|checkout|charge|billing|transfer|withdraw)`)

// Warnings are admitted-but-told remarks on a (defaulted) policy; old is nil on create.
func Warnings(old, p *v1alpha1.RateLimitPolicy) []string {
	var w []string
	w = append(w, hotSlotWarning(p)...)
	w = append(w, failOpenWarning(p)...)
	w = append(w, skipWarning(p)...)
	w = append(w, leaseWarning(p)...)
	w = append(w, shardWarning(p)...)
	w = append(w, unreadSourceWarnings(p)...)
	if old != nil {
		w = append(w, changeWarnings(old, p)...)
	}
	return w
}

// unreadSourceWarnings: in a fallback chain, the sources after one that always yields are
// never read: after a Fixed source on every front, after a Method or PathPrefix source on
// the HTTP fronts (only the Envoy front, which sees neither, reads on past them).
func unreadSourceWarnings(p *v1alpha1.RateLimitPolicy) []string {
	envoy := p.Spec.Match.Envoy != nil
	var w []string
	for i, c := range chains(p.Spec.Identity) {
		path := "spec.identity.sources"
		if len(p.Spec.Identity.Parts) > 0 {
			path = fmt.Sprintf("spec.identity.parts[%d].sources", i)
		}
		for j, src := range c[:max(len(c)-1, 0)] {
			http := src.Type == v1alpha1.IdentityMethod || src.Type == v1alpha1.IdentityPathPrefix
			if src.Type != v1alpha1.IdentityFixed && (!http || envoy) {
				continue
			}
			w = append(w, fmt.Sprintf("%s[%d] onwards is never read: %s[%d] (%s) yields a value for every request", path, j+1, path, j, src.Type))
			break
		}
	}
	return w
}

// hotSlotWarning: a tag without ${identity} puts every caller of the policy on one Redis
// Cluster slot (one node), unless the identity is Fixed on purpose (a global limit).
func hotSlotWarning(p *v1alpha1.RateLimitPolicy) []string {
	kl := p.Spec.KeyLayout
	if kl == nil || kl.State == "" || onlyFixed(p.Spec.Identity) {
		return nil
	}
	t, err := keylayout.Parse(kl.State)
	if err != nil {
		return nil
	}
	tag, ok := t.HashTag()
	if ok && strings.Contains(tag, "${"+keylayout.VarIdentity+"}") {
		return nil
	}
	if !ok && t.Uses(keylayout.VarIdentity) { // no tag: Redis hashes the whole key, identity included
		return nil
	}
	return []string{fmt.Sprintf("spec.keyLayout.state: hash tag {%s} does not contain ${identity}: every caller shares one Redis Cluster slot, which becomes a hot key on one node", tag)}
}

func onlyFixed(id v1alpha1.Identity) bool {
	for _, s := range id.Sources {
		if s.Type != v1alpha1.IdentityFixed {
			return false
		}
	}
	return len(id.Sources) > 0
}

// failOpenWarning: FailOpen on login- or payment-like paths admits unlimited attempts while
// Redis is away.
func failOpenWarning(p *v1alpha1.RateLimitPolicy) []string {
	if p.Spec.FailureMode != "" && p.Spec.FailureMode != v1alpha1.FailureModeFailOpen {
		return nil
	}
	for _, m := range p.Spec.Match.HTTP {
		for _, prefix := range m.PathPrefixes {
			if sensitivePath.MatchString(prefix) {
				return []string{fmt.Sprintf("spec.failureMode: FailOpen admits every request to %q while Redis is unavailable; login, token and payment paths usually want FailClosed or LocalCap", prefix)}
			}
		}
	}
	return nil
}

// changeWarnings: a new algorithm or key layout orphans the live counters; every caller
// starts with a fresh quota.
func changeWarnings(old, p *v1alpha1.RateLimitPolicy) []string {
	var w []string
	if old.Spec.Algorithm != p.Spec.Algorithm {
		w = append(w, fmt.Sprintf("spec.algorithm: changing %s to %s orphans the live counters: every caller starts with a full quota, and the old keys linger until their TTL",
			old.Spec.Algorithm, p.Spec.Algorithm))
	}
	if layout(old) != layout(p) {
		w = append(w, fmt.Sprintf("spec.keyLayout: changing the state key from %q to %q orphans the live counters: every caller starts with a full quota, and the old keys linger until their TTL",
			layout(old), layout(p)))
	}
	if a, b := shardsOf(old), shardsOf(p); a != b {
		w = append(w, fmt.Sprintf("spec.hotKeys.shards: changing %d to %d moves the budget to other keys: every caller starts with a full quota for the current window, and the old keys linger until their TTL", a, b))
	}
	return w
}

// shardsOf is the shard count of p, 1 when not sharded.
func shardsOf(p *v1alpha1.RateLimitPolicy) int32 {
	if hk := p.Spec.HotKeys; hk != nil && hk.Shards != nil && *hk.Shards > 1 {
		return *hk.Shards
	}
	return 1
}

func layout(p *v1alpha1.RateLimitPolicy) string {
	if p.Spec.KeyLayout == nil {
		return ""
	}
	return p.Spec.KeyLayout.State
}

// skipWarning: onMissing Skip admits, uncounted, every request without an identity, so a
// client escapes the limit by leaving its identity out (no header, a malformed token),
// unless a Fixed source always yields one (with parts: in every part).
func skipWarning(p *v1alpha1.RateLimitPolicy) []string {
	id := p.Spec.Identity
	if id.OnMissing != v1alpha1.MissingIdentitySkip {
		return nil
	}
	for i, c := range chains(id) {
		switch {
		case alwaysYields(c):
			continue
		case len(id.Parts) > 0:
			return []string{fmt.Sprintf("spec.identity.onMissing: Skip admits every request for which a part yields no value without counting it: a client escapes this limit by leaving out spec.identity.parts[%d] (no header, a malformed token); use Shared (a missing part counts as one shared value of its own) or Reject, unless a hop in front guarantees it", i)}
		}
		return []string{"spec.identity.onMissing: Skip admits every request for which no source yields an identity without counting it: a client escapes this limit by leaving its identity out (no header, a malformed token); use Shared (one budget for all of them) or Reject, unless a hop in front guarantees the identity"}
	}
	return nil
}

// leaseWarning: leases trade exact remaining counts and units held by sidecars for fewer
// Redis calls; the operator should know what they opt into.
func leaseWarning(p *v1alpha1.RateLimitPolicy) []string {
	if p.Spec.HotKeys == nil || p.Spec.HotKeys.Leases != v1alpha1.LeaseModeOn {
		return nil
	}
	w := "spec.hotKeys.leases: On lets each sidecar hold units of a hot identity debited ahead: never more than the limits is admitted, but units a sidecar holds unspent are unavailable to other sidecars until returned or expired (under-admission), and leased decisions report the lease's remaining units, not the identity's"
	if p.Spec.Algorithm == v1alpha1.AlgorithmTokenBucket || p.Spec.Algorithm == v1alpha1.AlgorithmGCRA {
		w += "; with " + string(p.Spec.Algorithm) + " a leased unit must be spent before the time slot it stands for, so leases pay off only for identities using a fair share of their rate"
	}
	return []string{w}
}

// shardWarning: a sharded global limit answers a denial only after asking every shard.
func shardWarning(p *v1alpha1.RateLimitPolicy) []string {
	n := shardsOf(p)
	if n == 1 {
		return nil
	}
	return []string{fmt.Sprintf("spec.hotKeys.shards: %d shards each hold a share of every limit; a request is denied only after every shard denied it, so a denial costs up to %d script calls (the sidecar's deny cache answers repeats locally), and admitted requests report their shard's remaining units",
		n, n)}
}
