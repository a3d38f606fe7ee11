package helm_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestTemplateAPIService: by default the usage API is registered with the aggregation layer:
// the APIService v1alpha1.usage.ratelimit.dev points at the usage Service's port and trusts
// (insecureSkipTLSVerify false) the CA of a chart-made serving certificate named for that
// Service, which the manager mounts as --usage-cert-dir; the manager runs with
// --usage-front-proxy, may delegate authentication (system:auth-delegator) and read the
// front-proxy settings in kube-system. With cert-manager the CA is injected from a
// Certificate for the same name instead.
func TestTemplateAPIService(t *testing.T) {
	objs := render(t, nil)
	api := objs.get(t, "APIService", "", "v1alpha1.usage.ratelimit.dev")
	if field(api, "spec", "insecureSkipTLSVerify") != false || field(api, "spec", "group") != "usage.ratelimit.dev" ||
		field(api, "spec", "service", "name") != fullname+"-usage" || fmt.Sprint(field(api, "spec", "service", "port")) != "8445" {
		t.Errorf("APIService spec %v", field(api, "spec"))
	}
	secret := typed[corev1.Secret](t, objs.get(t, "Secret", namespace, fullname+"-usage-tls"))
	if got := base64.StdEncoding.EncodeToString(secret.Data["ca.crt"]); got != field(api, "spec", "caBundle") {
		t.Errorf("caBundle is not the serving certificate's CA")
	}
	block, _ := pem.Decode(secret.Data["tls.crt"])
	if block == nil {
		t.Fatal("no serving certificate")
	}
	crt, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(secret.Data["ca.crt"])
	if _, err := crt.Verify(x509.VerifyOptions{Roots: roots, DNSName: fullname + "-usage." + namespace + ".svc"}); err != nil {
		t.Errorf("serving certificate for the Service name: %v", err)
	}
	args := managerArgs(t, objs)
	for _, want := range []string{"--usage-front-proxy", "--usage-cert-dir=/var/run/secrets/ratelimit/usage-tls"} {
		if !slices.Contains(args, want) {
			t.Errorf("manager args %q lack %s", args, want)
		}
	}
	if b := objs.get(t, "ClusterRoleBinding", "", fullname+"-usage-auth-delegator"); field(b, "roleRef", "name") != "system:auth-delegator" {
		t.Errorf("auth-delegator binding: role %v", field(b, "roleRef", "name"))
	}
	if b := objs.get(t, "RoleBinding", "kube-system", fullname+"-usage-authentication-reader"); field(b, "roleRef", "name") != "extension-apiserver-authentication-reader" {
		t.Errorf("authentication reader binding: role %v", field(b, "roleRef", "name"))
	}
	certManagerAPIService(t)
}

// certManagerAPIService: with cert-manager the APIService's CA is injected from a Certificate
// for the usage Service, whose Secret the manager mounts.
func certManagerAPIService(t *testing.T) {
	t.Helper()
	cm := render(t, nil, "webhook.certManager.enabled=true")
	api := cm.get(t, "APIService", "", "v1alpha1.usage.ratelimit.dev")
	if api.GetAnnotations()["cert-manager.io/inject-ca-from"] != namespace+"/"+fullname+"-usage-cert" || field(api, "spec", "caBundle") != nil {
		t.Errorf("cert-manager: APIService %v %v", api.GetAnnotations(), field(api, "spec"))
	}
	cert := cm.get(t, "Certificate", namespace, fullname+"-usage-cert")
	if field(cert, "spec", "secretName") != fullname+"-usage-tls" {
		t.Errorf("Certificate %v", field(cert, "spec"))
	}
}
