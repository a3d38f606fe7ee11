package redisbackend

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/backend"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// connect reads the backend's Secrets and has Redises reach it.
func (r *Reconciler) connect(ctx context.Context, b *v1alpha1.RedisBackend) error {
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
func (r *Reconciler) options(ctx context.Context, b *v1alpha1.RedisBackend) (o redisconn.Options, user, password string, err error) {
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
func (r *Reconciler) secret(ctx context.Context, ref *v1alpha1.SecretReference, typ corev1.SecretType) (*corev1.Secret, error) {
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
