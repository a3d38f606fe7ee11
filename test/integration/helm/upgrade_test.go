package helm_test

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// TestUpgradeKeepsSelfSignedCert: `helm install` into the API server, then `helm upgrade`:
// the upgrade changes what it was asked to but keeps the generated webhook certificate (the
// chart looks the Secret up), so the caBundle the API server trusts still matches the
// certificate the manager serves. The release is uninstalled afterwards: its webhooks fail
// closed and have no server behind them.
func TestUpgradeKeepsSelfSignedCert(t *testing.T) {
	e := env(t)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := kube.WriteKubeconfig(e.Config, kubeconfig); err != nil {
		t.Fatal(err)
	}
	const rel, ns = "upgrade-test", "helm-upgrade"
	name := rel + "-ratelimit-operator"
	helmArgs := func(args ...string) []string {
		return append(args, "--kubeconfig", kubeconfig, "--namespace", ns)
	}
	if out, err := runHelm(t, helmArgs("install", rel, chartDir(), "--create-namespace")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Cleanup(func() {
		if out, err := runHelm(t, helmArgs("uninstall", rel, "--wait")...); err != nil {
			t.Errorf("%v\n%s", err, out)
		}
	})

	ctx := context.Background()
	read := func() (*corev1.Secret, []byte, int32) {
		t.Helper()
		var s corev1.Secret
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + "-webhook-server-cert"}, &s); err != nil {
			t.Fatal(err)
		}
		var mwc admissionregistrationv1.MutatingWebhookConfiguration
		if err := e.Client.Get(ctx, client.ObjectKey{Name: name + "-mutating"}, &mwc); err != nil {
			t.Fatal(err)
		}
		var dep appsv1.Deployment
		if err := e.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &dep); err != nil {
			t.Fatal(err)
		}
		return &s, mwc.Webhooks[0].ClientConfig.CABundle, *dep.Spec.Replicas
	}
	before, caBefore, _ := read()
	verifyServing(t, before, name+"-webhook."+ns+".svc")
	if !bytes.Equal(caBefore, before.Data["ca.crt"]) {
		t.Fatalf("installed caBundle is not the Secret's ca.crt")
	}

	if out, err := runHelm(t, helmArgs("upgrade", rel, chartDir(), "--reuse-values", "--set", "replicaCount=2")...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	after, caAfter, replicas := read()
	if replicas != 2 {
		t.Errorf("upgrade did not apply: %d replicas, want 2", replicas)
	}
	for _, k := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if !bytes.Equal(before.Data[k], after.Data[k]) {
			t.Errorf("upgrade replaced the webhook Secret's %s", k)
		}
	}
	if !bytes.Equal(caBefore, caAfter) {
		t.Errorf("upgrade replaced the webhooks' caBundle")
	}
}
