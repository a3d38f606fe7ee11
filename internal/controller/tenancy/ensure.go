package tenancy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// ensure keeps the user and Secret of a namespace that has policies: created, repaired,
// rotated when due, the previous password retired after its grace.
func (r *Reconciler) ensure(ctx context.Context, ns string, s *corev1.Secret) (ctrl.Result, error) {
	place, err := r.serving(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	switch {
	case s == nil:
		return r.create(ctx, ns, place, nil)
	case !managedSecret(s):
		r.event(s, corev1.EventTypeWarning, "SecretNotManaged",
			"Secret %s lacks the labels %s=true and %s=%s, so the operator leaves it alone and namespace %s gets no Redis user of its own; delete it to let the operator create one",
			s.Name, LabelCredentials, labelManagedBy, managedByValue, ns)
		return ctrl.Result{}, nil
	case s.Type != corev1.SecretTypeBasicAuth:
		// The type is immutable: delete it; its deletion brings the namespace back here.
		return ctrl.Result{}, r.deleteSecret(ctx, s)
	}
	st := readTenantState(s)
	if st.username != r.userName(ns) || len(st.password) < MinPasswordLength {
		return r.create(ctx, ns, place, s) // hand-edited: a fresh password, trusted nowhere yet
	}
	now := time.Now()
	if err := r.apply(ctx, place, ns, st.hashes(now)); err != nil {
		return r.redisFailed(ctx, ns, s, err)
	}
	want := s.DeepCopy()
	delete(want.Annotations, AnnotationDeleteAfter) // a policy came back
	if err := r.follow(ctx, ns, want, st, place, now); err != nil {
		return r.redisFailed(ctx, ns, s, err)
	}
	if st.retiringHash != "" && !st.retiring(now) {
		delete(want.Annotations, AnnotationRetiringHash)
		delete(want.Annotations, AnnotationRetireAfter)
		logf.FromContext(ctx).Info("previous redis password retired", "namespace", ns, "user", st.username)
		r.event(s, corev1.EventTypeNormal, "PasswordRetired", "Redis no longer accepts the previous password of user %s", st.username)
	}
	if st.rotationDue(now, r.RotationPeriod) && !st.retiring(now) {
		return r.rotate(ctx, ns, place, want, st, now)
	}
	if err := r.updateIfChanged(ctx, s, want); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: readTenantState(want).next(now, r.RotationPeriod, false)}, nil
}

// create makes a fresh password, sets the user to accept only it on every node, then
// publishes it: as a new Secret, or over old, a managed Secret holding no usable
// credentials.
func (r *Reconciler) create(ctx context.Context, ns string, place Place, old *corev1.Secret) (ctrl.Result, error) {
	password, err := redisacl.NewPassword()
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.apply(ctx, place, ns, []string{redisacl.HashPassword(password)}); err != nil {
		return r.redisFailed(ctx, ns, old, err)
	}
	now := time.Now()
	if old != nil {
		want := old.DeepCopy()
		forgetRotation(want)
		setTenantCredentials(want, r.userName(ns), password, now)
		if err := r.follow(ctx, ns, want, readTenantState(old), place, now); err != nil {
			return r.redisFailed(ctx, ns, old, err)
		}
		if err := r.Update(ctx, want); err != nil {
			return ctrl.Result{}, fmt.Errorf("replace credentials in Secret %s/%s: %w", ns, r.SecretName, err)
		}
		r.event(want, corev1.EventTypeNormal, "CredentialsReplaced", "the Secret held no usable credentials of user %s: a new password replaced them", r.userName(ns))
		return ctrl.Result{RequeueAfter: readTenantState(want).next(now, r.RotationPeriod, false)}, nil
	}
	s := newTenantSecret(ns, r.SecretName, r.userName(ns), password, now)
	setBackend(s, place.Backend)
	err = r.Create(ctx, s)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		return ctrl.Result{}, nil // the namespace goes, its policies with it
	case err != nil:
		return ctrl.Result{}, fmt.Errorf("create Secret %s/%s: %w", ns, r.SecretName, err)
	}
	logf.FromContext(ctx).Info("created redis user", "namespace", ns, "user", r.userName(ns), "secret", r.SecretName)
	r.event(s, corev1.EventTypeNormal, "RedisUserCreated", "Redis user %s created on every node of %s; its credentials are in this Secret",
		r.userName(ns), backend.Describe(place.Backend))
	return ctrl.Result{RequeueAfter: readTenantState(s).next(now, r.RotationPeriod, false)}, nil
}

// rotate replaces the password without dropping a check: every node accepts the new
// password (besides the current one) before the Secret shows it, and the current one
// becomes the retiring one for Grace. If the Secret cannot be written, the next reconcile
// sets Redis back to the Secret's passwords.
func (r *Reconciler) rotate(ctx context.Context, ns string, place Place, want *corev1.Secret, st tenantState, now time.Time) (ctrl.Result, error) {
	password, err := redisacl.NewPassword()
	if err != nil {
		return ctrl.Result{}, err
	}
	previous := redisacl.HashPassword(st.password)
	if err := r.apply(ctx, place, ns, []string{redisacl.HashPassword(password), previous}); err != nil {
		return r.redisFailed(ctx, ns, want, err)
	}
	setTenantCredentials(want, st.username, password, now)
	want.Annotations[AnnotationRetiringHash] = previous
	want.Annotations[AnnotationRetireAfter] = formatTime(now.Add(r.Grace))
	markRotationHandled(want)
	if err := r.Update(ctx, want); err != nil {
		return ctrl.Result{}, fmt.Errorf("publish rotated password in Secret %s/%s: %w", ns, r.SecretName, err)
	}
	tenantRotations.Inc()
	retire := want.Annotations[AnnotationRetireAfter]
	logf.FromContext(ctx).Info("rotated redis password", "namespace", ns, "user", st.username, "previousAcceptedUntil", retire)
	r.event(want, corev1.EventTypeNormal, "PasswordRotated",
		"new password of Redis user %s published; the previous one is accepted until %s", st.username, retire)
	return ctrl.Result{RequeueAfter: readTenantState(want).next(now, r.RotationPeriod, false)}, nil
}

// updateIfChanged writes want when it differs from s.
func (r *Reconciler) updateIfChanged(ctx context.Context, s, want *corev1.Secret) error {
	if equality.Semantic.DeepEqual(s, want) {
		return nil
	}
	if err := r.Update(ctx, want); err != nil {
		return fmt.Errorf("update Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// deleteSecret deletes s as read: not a Secret written since.
func (r *Reconciler) deleteSecret(ctx context.Context, s *corev1.Secret) error {
	err := r.Delete(ctx, s, client.Preconditions{UID: &s.UID, ResourceVersion: &s.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete Secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}

// forgetRotation drops the rotation state of s: no previous password, no pending removal,
// any rotation request handled.
func forgetRotation(s *corev1.Secret) {
	for _, a := range []string{AnnotationRetiringHash, AnnotationRetireAfter, AnnotationDeleteAfter} {
		delete(s.Annotations, a)
	}
	markRotationHandled(s)
}

// markRotationHandled records the rotation request of s as handled.
func markRotationHandled(s *corev1.Secret) {
	if v := s.Annotations[AnnotationRotate]; v != "" {
		s.Annotations[AnnotationRotateHandled] = v
	}
}
