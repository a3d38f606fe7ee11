package redisbackend

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
)

// ReasonInvalidSpec is Connected's reason for a RedisBackend whose spec redisconn refuses
// (the CRD's rules refuse it first; this guards an object stored without them).
const ReasonInvalidSpec = "InvalidSpec"

// report sets the status: the namespaces served, Conflict, and the connection's conditions.
func (r *Reconciler) report(ctx context.Context, b *v1alpha1.RedisBackend, connErr error) error {
	b.Status.ObservedGeneration = b.Generation
	if err := r.setNamespaces(ctx, b); err != nil {
		return err
	}
	st := r.Redises.state(b.Name)
	r.setConnected(ctx, b, st, connErr)
	r.setScriptsLoaded(b, st)
	if r.Users {
		r.setUsersReady(b, st)
	} else {
		meta.RemoveStatusCondition(&b.Status.Conditions, v1alpha1.ConditionUsersReady)
	}
	setBackendReady(b)
	return nil
}

// setNamespaces lists the namespaces the backend serves and sets Conflict.
func (r *Reconciler) setNamespaces(ctx context.Context, b *v1alpha1.RedisBackend) error {
	var backends v1alpha1.RedisBackendList
	if err := r.List(ctx, &backends); err != nil {
		return fmt.Errorf("list RedisBackends: %w", err)
	}
	namespaces := &metav1.PartialObjectMetadataList{}
	namespaces.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.List(ctx, namespaces); err != nil {
		return fmt.Errorf("list namespaces: %w", err)
	}
	all := make([]backend.Namespace, len(namespaces.Items))
	for i, ns := range namespaces.Items {
		all[i] = backend.Namespace{Name: ns.Name, Labels: ns.Labels}
	}
	claims := backend.ClaimsOf(b.Name, backends.Items, all)
	b.Status.Namespaces, b.Status.NamespaceCount = claims.Serves, int32(min(len(claims.Serves), math.MaxInt32))
	if _, err := backend.Selector(b); err != nil {
		setBackendCondition(b, v1alpha1.ConditionConflict, metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector, err.Error())
		return nil
	}
	if len(claims.Conflicts) == 0 {
		setBackendCondition(b, v1alpha1.ConditionConflict, metav1.ConditionFalse, v1alpha1.ReasonNoConflict,
			"no namespace it selects is served by another RedisBackend")
		return nil
	}
	parts := make([]string, 0, len(claims.Conflicts))
	for _, c := range claims.Conflicts {
		parts = append(parts, c.Namespace+" (served by RedisBackend "+c.ServedBy+")")
	}
	msg := fmt.Sprintf("selects namespaces that a RedisBackend whose name sorts first serves: %s; change a namespaceSelector or the namespaces' labels",
		joinLimited(parts, 10))
	setBackendCondition(b, v1alpha1.ConditionConflict, metav1.ConditionTrue, v1alpha1.ReasonNamespaceConflict, msg)
	return nil
}

// setConnected reports whether the manager holds the credentials and Redis answers.
func (r *Reconciler) setConnected(ctx context.Context, b *v1alpha1.RedisBackend, st backendState, connErr error) {
	var ce *credentialsError
	var ie *invalidSpecError
	switch {
	case errors.As(connErr, &ce):
		setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonCredentialsUnavailable, connErr.Error())
	case errors.As(connErr, &ie):
		setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, ReasonInvalidSpec, connErr.Error())
	case st.redis == nil:
		setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable,
			fmt.Sprintf("not connected: %v", cmpErr(connErr, st.problem)))
	default:
		if err := st.redis.ping(ctx); err != nil {
			setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, err.Error())
			return
		}
		setBackendCondition(b, v1alpha1.ConditionConnected, metav1.ConditionTrue, v1alpha1.ReasonConnected,
			fmt.Sprintf("%s Redis at %s answers", st.redis.Topology.Mode, strings.Join(st.redis.Topology.Addrs, ", ")))
	}
}

// setScriptsLoaded reports the backend's script loader.
func (r *Reconciler) setScriptsLoaded(b *v1alpha1.RedisBackend, st backendState) {
	if st.redis == nil {
		setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, "not connected")
		return
	}
	switch ok, err := st.redis.Scripts.Loaded(); {
	case ok:
		setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded,
			"the limiter's scripts are loaded on every primary")
	case err != nil:
		setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, err.Error())
	default:
		setBackendCondition(b, v1alpha1.ConditionScriptsLoaded, metav1.ConditionUnknown, v1alpha1.ReasonNotChecked, "not loaded yet")
	}
}

// setUsersReady reports the backend's last user repair round.
func (r *Reconciler) setUsersReady(b *v1alpha1.RedisBackend, st backendState) {
	if st.redis == nil || st.redis.Users == nil {
		setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, "not connected")
		return
	}
	switch done, err := st.redis.users(); {
	case !done:
		setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionUnknown, v1alpha1.ReasonNotChecked, "not checked yet")
	case err != nil:
		setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable, err.Error())
	default:
		setBackendCondition(b, v1alpha1.ConditionUsersReady, metav1.ConditionTrue, v1alpha1.ReasonUsersReady,
			fmt.Sprintf("every node holds the %d per-namespace users it should", st.redis.Users.Wanted()))
	}
}

// setBackendReady derives Ready: True when Connected, ScriptsLoaded and (when reported)
// UsersReady are; else the first that is not, with its reason and message.
func setBackendReady(b *v1alpha1.RedisBackend) {
	for _, typ := range []string{v1alpha1.ConditionConnected, v1alpha1.ConditionScriptsLoaded, v1alpha1.ConditionUsersReady} {
		c := meta.FindStatusCondition(b.Status.Conditions, typ)
		if c != nil && c.Status != metav1.ConditionTrue {
			setBackendCondition(b, v1alpha1.ConditionReady, metav1.ConditionFalse, c.Reason, typ+": "+c.Message)
			return
		}
	}
	setBackendCondition(b, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady,
		fmt.Sprintf("serves %d namespace(s)", len(b.Status.Namespaces)))
}

func setBackendCondition(b *v1alpha1.RedisBackend, typ string, status metav1.ConditionStatus, reason, msg string) {
	meta.SetStatusCondition(&b.Status.Conditions, metav1.Condition{Type: typ, Status: status, Reason: reason,
		Message: msg, ObservedGeneration: b.Generation})
}

// cmpErr is the first non-nil error, or a generic one.
func cmpErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return errors.New("not connected yet")
}

// joinLimited lists items: at most limit, then how many more.
func joinLimited(items []string, limit int) string {
	if len(items) > limit {
		return strings.Join(items[:limit], ", ") + fmt.Sprintf(" and %d more", len(items)-limit)
	}
	return strings.Join(items, ", ")
}

// patchStatus writes the status if it changed.
func (r *Reconciler) patchStatus(ctx context.Context, before, b *v1alpha1.RedisBackend) error {
	if equality.Semantic.DeepEqual(before.Status, b.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, b, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("patch RedisBackend status: %w", client.IgnoreNotFound(err))
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		logf.FromContext(ctx).V(1).Info("RedisBackend status", "ready", c.Status, "reason", c.Reason,
			"namespaces", len(b.Status.Namespaces))
	}
	return nil
}
