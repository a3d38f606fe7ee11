package controller

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// publishedState is what a namespace's snapshot holds, as the policy controller needs it.
type publishedState struct {
	version  string
	policies map[string][32]byte // policy name -> hash of its compiled entry
	problem  string              // why nothing could be published, e.g. too large
}

// parsedConfigMap is the state of one version of a snapshot ConfigMap: every policy of a
// namespace asks about the same ConfigMap, which is parsed once per resourceVersion.
type parsedConfigMap struct {
	resourceVersion string
	state           publishedState
}

// state is what is published in ns, read from the (cached) snapshot ConfigMap, so that a
// restarted controller or a new leader reports what is there without a sync of its own.
// Only a problem that kept the snapshot from being written (nothing to read back) comes from
// this process's memory; it hides the ConfigMap, which is then out of date. ok is false when
// the state is not known (the ConfigMap cannot be read or was edited into something that
// does not parse); the namespace's next sync repairs it and its watch event asks again.
func (r *SnapshotReconciler) state(ctx context.Context, ns string) (publishedState, bool) {
	r.mu.Lock()
	problem := r.problems[ns]
	r.mu.Unlock()
	if problem != "" {
		return publishedState{problem: problem}, true
	}
	st, err := r.read(ctx, ns)
	if err != nil {
		logf.FromContext(ctx).V(1).Info("published snapshot not known yet", "namespace", ns, "reason", err.Error())
		return publishedState{}, false
	}
	return st, true
}

// read is what the namespace's ConfigMap holds: nothing when there is none.
func (r *SnapshotReconciler) read(ctx context.Context, ns string) (publishedState, error) {
	var cm corev1.ConfigMap
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		r.remember(ns, nil)
		return publishedState{}, nil
	}
	if err != nil {
		return publishedState{}, fmt.Errorf("get snapshot: %w", err)
	}
	r.mu.Lock()
	memo, ok := r.parsed[ns]
	r.mu.Unlock()
	if ok && memo.resourceVersion != "" && memo.resourceVersion == cm.ResourceVersion {
		return memo.state, nil
	}
	s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
	if err != nil {
		return publishedState{}, fmt.Errorf("parse snapshot: %w", err)
	}
	st := stateOf(s)
	r.remember(ns, &parsedConfigMap{resourceVersion: cm.ResourceVersion, state: st})
	return st, nil
}

// remember keeps the parsed state of ns's ConfigMap, or forgets it (nil).
func (r *SnapshotReconciler) remember(ns string, p *parsedConfigMap) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p == nil {
		delete(r.parsed, ns)
		return
	}
	if r.parsed == nil {
		r.parsed = map[string]parsedConfigMap{}
	}
	r.parsed[ns] = *p
}

func stateOf(s *snapshot.Snapshot) publishedState {
	st := publishedState{version: s.Version, policies: make(map[string][32]byte, len(s.Policies))}
	for _, p := range s.Policies {
		st.policies[p.Name] = entryHash(p)
	}
	return st
}

func entryHash(p snapshot.Entry) [32]byte {
	b, _ := json.Marshal(p) //nolint:errchkjson // plain data, cannot fail
	return sha256.Sum256(b)
}

// setProblem records why ns's snapshot could not be published ("" when it was) and, when
// that changed, tells the policy controller: no ConfigMap event reports it. The send gives
// up when ctx ends: after shutdown nobody reads the channel.
func (r *SnapshotReconciler) setProblem(ctx context.Context, ns, problem string) {
	ch := r.Changed()
	r.mu.Lock()
	old := r.problems[ns]
	if problem == "" {
		delete(r.problems, ns)
	} else {
		if r.problems == nil {
			r.problems = map[string]string{}
		}
		r.problems[ns] = problem
	}
	r.mu.Unlock()
	if old == problem {
		return
	}
	select {
	case ch <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}}:
	case <-ctx.Done():
	}
}

// Published reports whether entry is in the namespace's published snapshot, with the
// snapshot's version, or why nothing could be published.
func (r *SnapshotReconciler) Published(ctx context.Context, ns string, entry snapshot.Entry) (version string, ok bool, problem string) {
	st, _ := r.state(ctx, ns)
	h, found := st.policies[entry.Name]
	return st.version, found && h == entryHash(entry), st.problem
}

// Retains reports whether the namespace's published snapshot is known to carry an entry
// for the named policy, with that snapshot's version.
func (r *SnapshotReconciler) Retains(ctx context.Context, ns, name string) (string, bool) {
	st, known := r.state(ctx, ns)
	_, found := st.policies[name]
	return st.version, known && found
}

// Holds reports whether the namespace's published snapshot may still carry the named
// policy: true while that is not known.
func (r *SnapshotReconciler) Holds(ctx context.Context, ns, name string) bool {
	st, known := r.state(ctx, ns)
	_, found := st.policies[name]
	return found || !known
}
