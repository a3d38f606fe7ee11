package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// ReasonInvalidSpec is Connected's reason for a RedisBackend whose spec redisconn refuses
// (the CRD's rules refuse it first; this guards an object stored without them).
const ReasonInvalidSpec = "InvalidSpec"

// RedisBackendReconciler keeps each RedisBackend connected (Redises.connect: its Secrets
// read through the API server, uncached, every Refresh) on every replica, and on the leader
// reports its status: the namespaces it serves, Conflict, Connected, ScriptsLoaded,
// UsersReady (with per-namespace users) and Ready.
type RedisBackendReconciler struct {
	client.Client
	// APIReader reads the backends' Secrets: the manager caches no Secret but its tenants'.
	APIReader client.Reader
	// Redises holds the connections.
	Redises *Redises
	// Elected is closed once this replica leads: only the leader writes status.
	Elected <-chan struct{}
	// Users reports UsersReady: per-namespace users are on.
	Users bool
	// Refresh is how often the Secrets are read again and the status looked at. Default
	// DefaultRefresh.
	Refresh time.Duration
}

// A backend's administrative credentials (and CA) live in Secrets of the operator's own
// namespace ("system" here, the kustomize and Helm installs put their namespace in): the
// Role generated for this rule is bound there only, and the manager never lists or watches
// Secrets for it (one Get per backend and Refresh, through the uncached reader).
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=redisbackends,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.ratelimit.dev,resources=redisbackends/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list;watch
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get

// Reconcile connects the backend, and on the leader writes its status (deferred patch).
func (r *RedisBackendReconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	var b v1alpha1.RedisBackend
	if err := r.Get(ctx, req.NamespacedName, &b); err != nil {
		if apierrors.IsNotFound(err) {
			r.Redises.disconnect(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	res = ctrl.Result{RequeueAfter: r.refresh()}
	connErr := r.connect(ctx, &b)
	if connErr != nil {
		res.RequeueAfter = RedisRetry
	}
	if !r.leading() {
		return res, nil
	}
	before := b.DeepCopy()
	defer func() {
		if err := r.patchStatus(ctx, before, &b); err != nil && retErr == nil {
			retErr = err
		}
	}()
	return res, r.report(ctx, &b, connErr)
}

func (r *RedisBackendReconciler) refresh() time.Duration {
	if r.Refresh <= 0 {
		return DefaultRefresh
	}
	return r.Refresh
}

func (r *RedisBackendReconciler) leading() bool {
	select {
	case <-r.Elected:
		return true
	default:
		return false
	}
}

// connect reads the backend's Secrets and has Redises reach it.
func (r *RedisBackendReconciler) connect(ctx context.Context, b *v1alpha1.RedisBackend) error {
	o, user, password, err := r.options(ctx, b)
	if err != nil {
		r.Redises.fail(b.Name, err)
		return err
	}
	return r.Redises.connect(ctx, b.Name, optionsKey(o), o, user, password)
}

// credentialsError is a referenced Secret the manager cannot use.
type credentialsError struct{ err error }

func (e *credentialsError) Error() string { return e.err.Error() }
func (e *credentialsError) Unwrap() error { return e.err }

// invalidSpecError is a spec redisconn refuses.
type invalidSpecError struct{ err error }

func (e *invalidSpecError) Error() string { return e.err.Error() }
func (e *invalidSpecError) Unwrap() error { return e.err }

// options are the backend's connection options with its CA bundle, and its user and
// password.
func (r *RedisBackendReconciler) options(ctx context.Context, b *v1alpha1.RedisBackend) (o redisconn.Options, user, password string, err error) {
	o = backend.Options(b.Spec)
	if ref := b.Spec.CredentialsSecretRef; ref != nil {
		s, err := r.secret(ctx, ref, corev1.SecretTypeBasicAuth)
		if err != nil {
			return o, "", "", err
		}
		user, password = string(s.Data[corev1.BasicAuthUsernameKey]), string(s.Data[corev1.BasicAuthPasswordKey])
		if password == "" {
			return o, "", "", &credentialsError{fmt.Errorf("secret %s/%s has no password", ref.Namespace, ref.Name)}
		}
	}
	if t := b.Spec.TLS; t != nil && t.Enabled && t.CASecretRef != nil {
		s, err := r.secret(ctx, t.CASecretRef, "")
		if err != nil {
			return o, "", "", err
		}
		if o.TLS.CA = s.Data["ca.crt"]; len(o.TLS.CA) == 0 {
			return o, "", "", &credentialsError{fmt.Errorf("secret %s/%s has no ca.crt", t.CASecretRef.Namespace, t.CASecretRef.Name)}
		}
	}
	if err := o.Validate(); err != nil {
		return o, "", "", &invalidSpecError{err}
	}
	return o, user, password, nil
}

// secret reads the referenced Secret, uncached; typ, when set, is the type it must have.
func (r *RedisBackendReconciler) secret(ctx context.Context, ref *v1alpha1.SecretReference, typ corev1.SecretType) (*corev1.Secret, error) {
	var s corev1.Secret
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &s)
	switch {
	case apierrors.IsForbidden(err):
		return nil, &credentialsError{fmt.Errorf("secret %s/%s: the manager may read Secrets only in its own namespace: %w", ref.Namespace, ref.Name, err)}
	case err != nil:
		return nil, &credentialsError{fmt.Errorf("secret %s/%s: %w", ref.Namespace, ref.Name, err)}
	case typ != "" && s.Type != typ:
		return nil, &credentialsError{fmt.Errorf("secret %s/%s is of type %s, not %s", ref.Namespace, ref.Name, s.Type, typ)}
	}
	return &s, nil
}

// optionsKey is what a connection is built from: a change makes a new one. The
// credentials are not in it: a new password reaches the current client's new connections.
func optionsKey(o redisconn.Options) string {
	h := sha256.New()
	_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00%d\x00%t\x00%s\x00%t\x00", o.Mode, strings.Join(o.Addrs, ","), o.MasterName, o.DB,
		o.TLS.Enabled, o.TLS.ServerName, o.Credentials != nil)
	h.Write(o.TLS.CA)
	return hex.EncodeToString(h.Sum(nil))
}

// report sets the status: the namespaces served, Conflict, and the connection's conditions.
func (r *RedisBackendReconciler) report(ctx context.Context, b *v1alpha1.RedisBackend, connErr error) error {
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
func (r *RedisBackendReconciler) setNamespaces(ctx context.Context, b *v1alpha1.RedisBackend) error {
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
func (r *RedisBackendReconciler) setConnected(ctx context.Context, b *v1alpha1.RedisBackend, st backendState, connErr error) {
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
func (r *RedisBackendReconciler) setScriptsLoaded(b *v1alpha1.RedisBackend, st backendState) {
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
func (r *RedisBackendReconciler) setUsersReady(b *v1alpha1.RedisBackend, st backendState) {
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
func (r *RedisBackendReconciler) patchStatus(ctx context.Context, before, b *v1alpha1.RedisBackend) error {
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

// SetupWithManager registers the controller on every replica (each connects; the leader
// writes status): a backend's spec changes (every backend's status, for conflicts),
// namespaces created or relabelled, and its connection's state changing.
func (r *RedisBackendReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := handler.EnqueueRequestsFromMapFunc(r.allBackends)
	return ctrl.NewControllerManagedBy(mgr).
		Named("redisbackend").
		For(&v1alpha1.RedisBackend{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.RedisBackend{}, all, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, all, builder.OnlyMetadata, builder.WithPredicates(namespaceChanges())).
		WatchesRawSource(source.Channel(r.Redises.statuses, &handler.EnqueueRequestForObject{})).
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(false)}).
		Complete(r)
}

// allBackends maps any event to every RedisBackend.
func (r *RedisBackendReconciler) allBackends(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.RedisBackendList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}}
	}
	return out
}

// namespaceChanges passes what changes the namespaces a backend serves: a namespace
// created or deleted, or its labels changed.
func namespaceChanges() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: labelsChanged().Update,
		// Created and deleted: the default true. Generic: none come.
	}
}
