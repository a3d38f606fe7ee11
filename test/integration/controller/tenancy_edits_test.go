package controller

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestTenantSecretEdits: a credentials Secret deleted by hand comes back with a new
// password, the only one Redis then accepts; one whose password was edited to something
// short is given a fresh one; a Secret of that name the operator did not write (a copy of
// a shared user's credentials from before) is left as it is, reported in a Warning event,
// and its namespace gets no user, also after its last policy goes.
func TestTenantSecretEdits(t *testing.T) {
	e := suite(t)
	r := standaloneTenantRedis(t)
	ns, foreign := kube.NewNamespace(t, e, "edit-"), kube.NewNamespace(t, e, "foreign-")
	copied := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: foreign, Name: tenantSecret},
		Type: corev1.SecretTypeBasicAuth, StringData: map[string]string{"username": "ratelimit", "password": "the-shared-one"}}
	create(t, e, copied)
	startTenantManager(t, e, r, r.tenancy(tenantGrace, 0), ns, foreign)
	ctx := ctxFor(t)
	create(t, e, newPolicy(ns, "api", 10), newPolicy(foreign, "api", 10))
	first := waitCredentials(t, e, ns)

	if err := e.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	second := waitReplaced(t, e, ns, first)
	wait.Eventually(t, readyTimeout, "only the recreated Secret's password", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, string(second.Data["password"]))
	})

	edited := second.DeepCopy()
	edited.Data["password"] = []byte("short")
	if err := e.Client.Update(ctx, edited); err != nil {
		t.Fatal(err)
	}
	third := waitReplaced(t, e, ns, edited)
	wait.Eventually(t, readyTimeout, "only the fresh password", func() error {
		return r.userEverywhere(ctx, t, tenantPrefix+ns, string(third.Data["password"]))
	})

	checkForeignUntouched(ctx, t, e, r, foreign)
	deletePolicy(t, e, foreign, "api")
	waitGone(t, e, foreign, "api")
	wait.Consistently(t, tenantGrace+time.Second, "the copied Secret stays after the last policy", func() error {
		s := getSecret(t, e, foreign)
		if s == nil || string(s.Data["password"]) != "the-shared-one" {
			return fmt.Errorf("the copied Secret is gone or changed: %v", s)
		}
		return nil
	})
}

// waitReplaced waits until the Secret holds operator-made credentials other than prev's.
func waitReplaced(t *testing.T, e *kube.Env, ns string, prev *corev1.Secret) *corev1.Secret {
	t.Helper()
	waitSecret(t, e, ns, "new credentials", func(s *corev1.Secret) error {
		if bytes.Equal(s.Data["password"], prev.Data["password"]) {
			return fmt.Errorf("still the previous password")
		}
		return nil
	})
	return waitCredentials(t, e, ns)
}

// checkForeignUntouched: the namespace's Secret is as the user wrote it, a Warning event
// says why, and Redis has no user for the namespace.
func checkForeignUntouched(ctx context.Context, t *testing.T, e *kube.Env, r *tenantRedis, ns string) {
	t.Helper()
	wait.Eventually(t, readyTimeout, "SecretNotManaged event", func() error {
		var list eventsv1.EventList
		if err := e.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Secret" && ev.Reason == "SecretNotManaged" && ev.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("%d events, none SecretNotManaged", len(list.Items))
	})
	s := getSecret(t, e, ns)
	if s == nil || string(s.Data["password"]) != "the-shared-one" || string(s.Data["username"]) != "ratelimit" {
		t.Fatalf("the copied Secret changed: %v", s)
	}
	if err := r.userNowhere(ctx, t, tenantPrefix+ns); err != nil {
		t.Fatal(err)
	}
}
