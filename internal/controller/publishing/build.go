package publishing

import (
	"slices"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// Published is what a namespace's snapshot ConfigMap holds: the document and the policies
// that own it. The zero value is nothing published.
type Published struct {
	// Snapshot is the published document, nil when there is none (or it cannot be read).
	Snapshot *snapshot.Snapshot
	// Owners are the ConfigMap's owner references, one per policy it carries.
	Owners []metav1.OwnerReference
}

// entry is the published entry of the policy named name with uid, if any.
func (p Published) entry(name string, uid types.UID) (snapshot.Entry, bool) {
	if p.Snapshot == nil || !slices.ContainsFunc(p.Owners, func(o metav1.OwnerReference) bool { return o.Name == name && o.UID == uid }) {
		return snapshot.Entry{}, false
	}
	i := slices.IndexFunc(p.Snapshot.Policies, func(e snapshot.Entry) bool { return e.Name == name })
	if i < 0 {
		return snapshot.Entry{}, false
	}
	return p.Snapshot.Policies[i], true
}

// SnapshotOf compiles a namespace's policies (defaulted in memory, so policies stored without the
// webhook still work) into a sealed snapshot, skipping invalid and deleting ones, and returns
// the owner references of the policies it holds.
func SnapshotOf(ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	return SnapshotOver(policy.Rules{}, ns, redis, items, Published{})
}

// SnapshotOver is SnapshotOf over what is published: a policy that no longer compiles (an edit
// that bypassed the webhook, or a rule added by an upgrade) keeps the entry last published
// for it, so a bad edit never silently removes a limit that was enforced; its status says
// it is invalid and that its last valid version stays in force.
func SnapshotOver(rules policy.Rules, ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy, last Published) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	return snapshotOver(rules.Compile, rules.Prefix(), ns, redis, items, last)
}

// snapshotOver is SnapshotOver with compile compiling each policy, under the key prefix prefix.
func snapshotOver(compile CompileFunc, prefix, ns string, redis snapshot.Redis, items []v1alpha1.RateLimitPolicy, last Published) (*snapshot.Snapshot, []metav1.OwnerReference, error) {
	sort.Slice(items, func(i, j int) bool { return items[i].Name < items[j].Name })
	snap := &snapshot.Snapshot{Namespace: ns, KeyPrefix: prefix, Redis: redis, Scripts: []snapshot.Script{},
		Policies: []snapshot.Entry{}}
	var owners []metav1.OwnerReference
	scripts := map[string]string{}
	for i := range items {
		if !items[i].DeletionTimestamp.IsZero() {
			continue
		}
		entry, ok := publishedEntry(compile, prefix, ns, &items[i], last)
		if !ok {
			continue
		}
		snap.Policies = append(snap.Policies, entry)
		scripts[entry.Script] = entry.SHA
		owners = append(owners, metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(),
			Kind: "RateLimitPolicy", Name: items[i].Name, UID: items[i].UID})
	}
	for name, sha := range scripts {
		snap.Scripts = append(snap.Scripts, snapshot.Script{Name: name, SHA: sha})
	}
	sort.Slice(snap.Scripts, func(i, j int) bool { return snap.Scripts[i].Name < snap.Scripts[j].Name })
	if err := snap.Seal(); err != nil {
		return nil, nil, err
	}
	return snap, owners, nil
}

// publishedEntry is the snapshot entry of item: compiled, or, when it does not compile, the
// entry last published for it, if that one still holds under the key prefix (ok false
// otherwise: a policy that breaks the key scope, say, loses its entry rather than keep keys
// outside it).
func publishedEntry(compile CompileFunc, prefix, ns string, item *v1alpha1.RateLimitPolicy, last Published) (snapshot.Entry, bool) {
	compiled, errs := compile(item)
	if len(errs) == 0 {
		return compiled.Entry, true
	}
	kept, ok := last.entry(item.Name, item.UID)
	if !ok || kept.InScope(prefix) != nil {
		return snapshot.Entry{}, false
	}
	if errs := limiterspec.Validate(ns, kept); len(errs) > 0 {
		return snapshot.Entry{}, false
	}
	return kept, true
}
