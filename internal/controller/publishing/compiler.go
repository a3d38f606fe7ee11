package publishing

import (
	"encoding/json"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
)

// Compiler compiles policies with the installation's rules, each once per (UID, generation):
// the policy controller and every sync of the namespace's snapshot ask for the same
// compilation, and policy.Rules.Compile (default a copy, build the entry for its horizon,
// build it again and compile it) is the costly part of both. Safe for concurrent use.
type Compiler struct {
	// Rules are the installation's validation settings, as the webhook's.
	Rules policy.Rules

	mu     sync.Mutex
	byName map[types.NamespacedName]*compiledGeneration
}

// compiledGeneration is what one generation of a policy compiled to, by variant.
type compiledGeneration struct {
	uid        types.UID
	generation int64
	variants   map[string]compiledResult
}

type compiledResult struct {
	compiled policy.Compiled
	errs     field.ErrorList
}

// maxVariants bounds the variants kept for one generation (the policy as written and as its
// targets gave it match.http, over route edits).
const maxVariants = 4

// Compile is Rules.Compile of p, compiled once per UID, generation and variant (what besides the
// spec Compile reads: the annotations recording defaults, and the match a policy's targets
// gave it). A policy never stored (no UID or generation) is compiled each time. The result
// is shared: callers must not change it.
func (c *Compiler) Compile(p *v1alpha1.RateLimitPolicy) (policy.Compiled, field.ErrorList) {
	if p.UID == "" || p.Generation == 0 {
		return c.Rules.Compile(p)
	}
	key, variant := client.ObjectKeyFromObject(p), variantOf(p)
	if r, ok := c.lookup(key, p, variant); ok {
		return r.compiled, r.errs
	}
	compiled, errs := c.Rules.Compile(p)
	c.store(key, p, variant, compiledResult{compiled: compiled, errs: errs})
	return compiled, errs
}

func (c *Compiler) lookup(key types.NamespacedName, p *v1alpha1.RateLimitPolicy, variant string) (compiledResult, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.byName[key]
	if g == nil || g.uid != p.UID || g.generation != p.Generation {
		return compiledResult{}, false
	}
	r, ok := g.variants[variant]
	return r, ok
}

func (c *Compiler) store(key types.NamespacedName, p *v1alpha1.RateLimitPolicy, variant string, r compiledResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byName == nil {
		c.byName = map[types.NamespacedName]*compiledGeneration{}
	}
	g := c.byName[key]
	switch {
	case g != nil && (g.uid != p.UID || g.generation > p.Generation):
		if g.uid == p.UID { // an older generation read from a stale cache: keep the newer
			return
		}
		g = nil
	case g != nil && g.generation < p.Generation, g != nil && len(g.variants) >= maxVariants:
		g = nil
	}
	if g == nil {
		g = &compiledGeneration{uid: p.UID, generation: p.Generation, variants: map[string]compiledResult{}}
		c.byName[key] = g
	}
	g.variants[variant] = r
}

// Forget drops what the named policy compiled to: it is deleted.
func (c *Compiler) Forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.byName, key)
}

// variantOf is what Compile reads of p besides its spec's generation: the annotations that
// record defaults and, for a policy with targetRefs, the match its targets gave it.
func variantOf(p *v1alpha1.RateLimitPolicy) string {
	v := p.Annotations[policy.AnnotationDefaultedStateKey] + "\x00" + p.Annotations[policy.AnnotationDefaultedTTL]
	if len(p.Spec.TargetRefs) > 0 {
		b, _ := json.Marshal(p.Spec.Match) //nolint:errchkjson // plain data, cannot fail
		v += "\x00" + string(b)
	}
	return v
}

// CompileFunc compiles a policy: policy.Rules.Compile, or a Compiler's cached Compile.
type CompileFunc func(*v1alpha1.RateLimitPolicy) (policy.Compiled, field.ErrorList)

// CompileWith is c's Compile, or rules' when there is no c.
func CompileWith(c *Compiler, rules policy.Rules) CompileFunc {
	if c == nil {
		return rules.Compile
	}
	return c.Compile
}
