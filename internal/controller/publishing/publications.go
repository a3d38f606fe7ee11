package publishing

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// PublishedView is what the policy controller reads of what is published: whether a
// policy's entry is in its namespace's snapshot, and a channel telling when that may have
// changed. Publications implements it; the snapshot controller writes it.
type PublishedView interface {
	// Published reports whether entry is in the namespace's published snapshot, with the
	// snapshot's version, or why nothing could be published.
	Published(ctx context.Context, ns string, entry snapshot.Entry) (version string, ok bool, problem string)
	// Retains reports whether the namespace's published snapshot is known to carry an
	// entry for the named policy, with that snapshot's version.
	Retains(ctx context.Context, ns, name string) (string, bool)
	// Holds reports whether the namespace's published snapshot may still carry the named
	// policy: true while that is not known.
	Holds(ctx context.Context, ns, name string) bool
	// Changed delivers an event (its object names the namespace) whenever what is
	// published in a namespace changes.
	Changed() <-chan event.GenericEvent
}

// Publications is what each namespace's snapshot ConfigMap holds: what the snapshot
// controller last wrote there or, before its first sync of the namespace, what the ConfigMap
// already holds. The snapshot controller records each sync; the policy controller reads it
// (PublishedView) to report Published, and hears of changes on Changed. Safe for concurrent
// use.
type Publications struct {
	// Reader reads a namespace's ConfigMap before its first sync.
	Reader client.Reader

	mu        sync.Mutex
	published map[string]publishedState // by namespace
	changed   chan event.GenericEvent
	// overridesChanged tells the override controller of the namespaces whose override
	// verdicts changed; nil until it listens (OverridesChanged), so that a manager without
	// it never blocks on a full channel.
	overridesChanged chan event.GenericEvent
}

var _ PublishedView = (*Publications)(nil)

// publishedState is what the last write or read of a namespace's ConfigMap holds.
type publishedState struct {
	version  string
	policies map[string][32]byte // policy name -> hash of its compiled entry
	problem  string              // why nothing could be published, e.g. too large
	seeded   bool                // read from the ConfigMap, not yet recorded by a sync
	// overrides are the verdicts of the namespace's overrides by name, nil when not known
	// (seeded from the ConfigMap).
	overrides map[string]OverrideVerdict
}

// Changed implements PublishedView.
func (p *Publications) Changed() <-chan event.GenericEvent { return p.channel() }

func (p *Publications) channel() chan event.GenericEvent { return p.lazy(&p.changed) }

// lazy is *ch, made on first use.
func (p *Publications) lazy(ch *chan event.GenericEvent) chan event.GenericEvent {
	p.mu.Lock()
	defer p.mu.Unlock()
	if *ch == nil {
		*ch = make(chan event.GenericEvent, 1024)
	}
	return *ch
}

func stateOf(s *snapshot.Snapshot) publishedState {
	st := publishedState{version: s.Version, policies: make(map[string][32]byte, len(s.Policies))}
	for _, e := range s.Policies {
		st.policies[e.Name] = entryHash(e)
	}
	return st
}

// entryHash is the hash of a policy's entry without its overrides: the policy controller
// compares it with the entry the policy compiles to, which has none (overrides are not the
// policy's to publish).
func entryHash(e snapshot.Entry) [32]byte {
	e.Overrides = nil
	b, _ := json.Marshal(e) //nolint:errchkjson // plain data, cannot fail
	return sha256.Sum256(b)
}

// record stores what is published in ns and, when it changed, tells the policy controller.
// The send gives up when ctx ends: after shutdown nobody reads the channel.
func (p *Publications) record(ctx context.Context, ns string, st publishedState) {
	if p == nil {
		return
	}
	ch := p.channel()
	p.mu.Lock()
	if p.published == nil {
		p.published = map[string]publishedState{}
	}
	old, seen := p.published[ns]
	p.published[ns] = st
	listener := p.overridesChanged
	p.mu.Unlock()
	if listener != nil && (!maps.Equal(old.overrides, st.overrides) || old.problem != st.problem) {
		p.tell(ctx, listener, ns)
	}
	// The first sync after a seed always tells: policies evaluated while the state was not
	// known yet (an edited ConfigMap) wait for it.
	if seen && !old.seeded && old.version == st.version && old.problem == st.problem {
		return
	}
	p.tell(ctx, ch, ns)
}

// tell sends ch an event naming namespace ns, unless ctx ends first.
func (p *Publications) tell(ctx context.Context, ch chan event.GenericEvent, ns string) {
	select {
	case ch <- event.GenericEvent{Object: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: snapshot.ConfigMapName}}}:
	case <-ctx.Done():
	}
}

func (p *Publications) overrideChannel() chan event.GenericEvent { return p.lazy(&p.overridesChanged) }

// OverridesChanged delivers an event (its object names the namespace) whenever the
// verdicts of a namespace's overrides may have changed.
func (p *Publications) OverridesChanged() <-chan event.GenericEvent { return p.overrideChannel() }

// Override is the verdict of the namespace's override name as the last sync decided it:
// known is false before the namespace's first sync, or when nothing could be published
// (then problem says why).
func (p *Publications) Override(ns, name string) (v OverrideVerdict, known bool, problem string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.published[ns]
	if !ok || st.overrides == nil {
		return OverrideVerdict{}, false, st.problem
	}
	v, known = st.overrides[name]
	return v, known, ""
}

// state is what is published in ns: what the snapshot controller last recorded or, before
// its first sync of the namespace, what the ConfigMap already holds. Without the read, a
// restarted controller would report every policy PublishPending (Ready flapping, two events
// per policy) until its first sync. ok is false when that is not known yet (the ConfigMap
// cannot be read or was edited); the namespace's next sync records it.
func (p *Publications) state(ctx context.Context, ns string) (publishedState, bool) {
	p.mu.Lock()
	st, ok := p.published[ns]
	p.mu.Unlock()
	if ok {
		return st, true
	}
	st, err := p.read(ctx, ns)
	if err != nil {
		logf.FromContext(ctx).V(1).Info("published snapshot not known yet", "namespace", ns, "reason", err.Error())
		return publishedState{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.published == nil {
		p.published = map[string]publishedState{}
	}
	if cur, ok := p.published[ns]; ok { // a sync recorded it meanwhile: it is newer
		return cur, true
	}
	st.seeded = true
	p.published[ns] = st
	return st, true
}

// read is what the namespace's ConfigMap holds: nothing when there is none.
func (p *Publications) read(ctx context.Context, ns string) (publishedState, error) {
	var cm corev1.ConfigMap
	err := p.Reader.Get(ctx, types.NamespacedName{Namespace: ns, Name: snapshot.ConfigMapName}, &cm)
	if apierrors.IsNotFound(err) {
		return publishedState{}, nil
	}
	if err != nil {
		return publishedState{}, fmt.Errorf("get snapshot: %w", err)
	}
	s, err := snapshot.Parse([]byte(cm.Data[snapshot.DataKey]))
	if err != nil {
		return publishedState{}, fmt.Errorf("parse snapshot: %w", err)
	}
	return stateOf(s), nil
}

// Published implements PublishedView.
func (p *Publications) Published(ctx context.Context, ns string, entry snapshot.Entry) (version string, ok bool, problem string) {
	st, _ := p.state(ctx, ns)
	h, found := st.policies[entry.Name]
	return st.version, found && h == entryHash(entry), st.problem
}

// Retains implements PublishedView.
func (p *Publications) Retains(ctx context.Context, ns, name string) (string, bool) {
	st, known := p.state(ctx, ns)
	_, found := st.policies[name]
	return st.version, known && found
}

// Holds implements PublishedView.
func (p *Publications) Holds(ctx context.Context, ns, name string) bool {
	st, known := p.state(ctx, ns)
	_, found := st.policies[name]
	return found || !known
}
