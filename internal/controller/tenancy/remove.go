package tenancy

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
)

// remove retires the user of a namespace with no policy left. Sidecars may still enforce
// the last snapshot until the kubelet refreshes it, so the user and the Secret stay for
// Grace (AnnotationDeleteAfter), then the user is deleted from every node (which also closes
// its connections) and the Secret after it. A Secret the operator did not write stays; a
// user without a Secret, or with one holding no usable credentials, goes at once.
func (r *Reconciler) remove(ctx context.Context, ns string, s *corev1.Secret) (ctrl.Result, error) {
	if s == nil || !managedSecret(s) {
		return r.deleteUser(ctx, ns, nil)
	}
	st := readTenantState(s)
	if st.username != r.userName(ns) || len(st.password) < MinPasswordLength {
		return r.deleteUser(ctx, ns, s)
	}
	now := time.Now()
	if st.deleteAfter.IsZero() {
		want := s.DeepCopy()
		if want.Annotations == nil {
			want.Annotations = map[string]string{}
		}
		want.Annotations[AnnotationDeleteAfter] = formatTime(now.Add(r.Grace))
		if err := r.updateIfChanged(ctx, s, want); err != nil {
			return ctrl.Result{}, err
		}
		st = readTenantState(want)
		logf.FromContext(ctx).Info("namespace has no policy left; its redis user goes after the grace",
			"namespace", ns, "user", st.username, "deleteAfter", want.Annotations[AnnotationDeleteAfter])
	}
	if now.Before(st.deleteAfter) {
		if err := r.applyOn(ctx, st.backend, ns, st.hashes(now)); err != nil {
			return r.redisFailed(ctx, ns, s, err)
		}
		return ctrl.Result{RequeueAfter: st.next(now, r.RotationPeriod, true)}, nil
	}
	return r.deleteUser(ctx, ns, s)
}

// deleteUser deletes the namespace's user from every node of every Redis that may hold
// it (the one serving the namespace, the one its Secret says holds it, the one it is
// leaving), then s when it is the operator's.
func (r *Reconciler) deleteUser(ctx context.Context, ns string, s *corev1.Secret) (ctrl.Result, error) {
	places := map[string]bool{}
	if p, err := r.serving(ctx, ns); err == nil {
		places[p.Backend] = true
	}
	if s == nil {
		places[backend.Default] = true // where it lived is not known: the repair loop found it there
	} else {
		st := readTenantState(s)
		places[st.backend] = true
		if st.leaving {
			places[st.left] = true
		}
	}
	for name := range places {
		if err := r.deleteFrom(ctx, name, ns); err != nil {
			return r.redisFailed(ctx, ns, s, err)
		}
	}
	if s == nil {
		return ctrl.Result{}, nil
	}
	if err := r.deleteSecret(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	logf.FromContext(ctx).Info("deleted redis user and its Secret", "namespace", ns, "user", r.userName(ns),
		"secret", s.Name)
	return ctrl.Result{}, nil
}
