package install

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Names config/default renders: namespace ratelimit-system, prefix ratelimit-.
const (
	installNamespace = "ratelimit-system"
	webhookService   = "ratelimit-webhook-service"
	servingCert      = "ratelimit-serving-cert"
	injectCAFrom     = "cert-manager.io/inject-ca-from"
	certDir          = "/tmp/k8s-webhook-server/serving-certs"
)

// rendered is config/default as kustomize builds it, by kind and name.
type rendered map[string]map[string][]byte

func (r rendered) get(t *testing.T, kind, name string, into any) {
	t.Helper()
	raw, ok := r[kind][name]
	if !ok {
		t.Fatalf("config/default renders no %s %s (has %v)", kind, name, r.names(kind))
	}
	// Kubernetes types are decoded strictly, so a misspelt field in a manifest fails here.
	decode := func(b []byte, v any) error { return yaml.Unmarshal(b, v) }
	if _, typed := into.(runtime.Object); typed {
		decode = func(b []byte, v any) error { return yaml.UnmarshalStrict(b, v) }
	}
	if err := decode(raw, into); err != nil {
		t.Fatalf("decode %s %s: %v", kind, name, err)
	}
}

// decoded is the rendered object of kind and name, decoded strictly as its Kubernetes type T.
func decoded[T any, P interface {
	*T
	client.Object
}](t *testing.T, r rendered, kind, name string) P {
	t.Helper()
	p := P(new(T))
	r.get(t, kind, name, p)
	return p
}

func (r rendered) names(kind string) []string {
	var out []string
	for n := range r[kind] {
		out = append(out, n)
	}
	return out
}

// renderDefault runs `kubectl kustomize config/default` and splits the result.
func renderDefault(t *testing.T) rendered {
	t.Helper()
	r, _ := renderDir(t, filepath.Join("config", "default"))
	return r
}

// TestKustomizeDefaultWebhooks renders config/default and checks the webhook wiring: both
// configurations fail closed, have no side effects, a 5s timeout and Equivalent matching,
// reach the prefixed Service in the install namespace, and get their CA from the serving
// Certificate through cert-manager, whose DNS names are that Service's.
func TestKustomizeDefaultWebhooks(t *testing.T) {
	r := renderDefault(t)
	want := injectCAFrom + "=" + installNamespace + "/" + servingCert

	for _, c := range []struct{ kind, name, path string }{
		{"MutatingWebhookConfiguration", "ratelimit-mutating-webhook-configuration", "/mutate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy"},
		{"ValidatingWebhookConfiguration", "ratelimit-validating-webhook-configuration", "/validate-policy-ratelimit-dev-v1alpha1-ratelimitpolicy"},
	} {
		// The fields both kinds share; TestKustomizeDefaultAcceptedByAPIServer decodes
		// them strictly as their own types.
		var wc struct {
			Metadata struct{ Annotations map[string]string }
			Webhooks []struct {
				Name           string
				FailurePolicy  *admissionregistrationv1.FailurePolicyType  `json:"failurePolicy"`
				SideEffects    *admissionregistrationv1.SideEffectClass    `json:"sideEffects"`
				TimeoutSeconds *int32                                      `json:"timeoutSeconds"`
				MatchPolicy    *admissionregistrationv1.MatchPolicyType    `json:"matchPolicy"`
				ClientConfig   admissionregistrationv1.WebhookClientConfig `json:"clientConfig"`
			}
		}
		r.get(t, c.kind, c.name, &wc)
		if got := injectCAFrom + "=" + wc.Metadata.Annotations[injectCAFrom]; got != want {
			t.Errorf("%s: annotation %s, want %s", c.kind, got, want)
		}
		if len(wc.Webhooks) != 1 {
			t.Fatalf("%s has %d webhooks, want 1", c.kind, len(wc.Webhooks))
		}
		w := wc.Webhooks[0]
		checkWebhook(t, w.Name, w.FailurePolicy, w.SideEffects, w.TimeoutSeconds, w.MatchPolicy, w.ClientConfig, c.path)
	}

	var cert struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			DNSNames   []string `json:"dnsNames"`
			SecretName string   `json:"secretName"`
			IssuerRef  struct{ Kind, Name string }
		}
	}
	r.get(t, "Certificate", servingCert, &cert)
	wantDNS := []string{webhookService + "." + installNamespace + ".svc", webhookService + "." + installNamespace + ".svc.cluster.local"}
	if cert.Metadata.Namespace != installNamespace || !slices.Equal(cert.Spec.DNSNames, wantDNS) ||
		cert.Spec.SecretName != "webhook-server-cert" || cert.Spec.IssuerRef.Kind != "Issuer" {
		t.Errorf("certificate %+v: want namespace %s, dnsNames %q, secret webhook-server-cert, an Issuer", cert, installNamespace, wantDNS)
	}
	var issuer struct {
		Metadata struct{ Name, Namespace string }
		Spec     struct {
			SelfSigned *struct{} `json:"selfSigned"`
		}
	}
	r.get(t, "Issuer", cert.Spec.IssuerRef.Name, &issuer)
	if issuer.Metadata.Namespace != installNamespace || issuer.Spec.SelfSigned == nil {
		t.Errorf("issuer %+v: want a self-signed issuer in %s", issuer, installNamespace)
	}
	for _, crd := range []string{"ratelimitpolicies.policy.ratelimit.dev", "ratelimitoverrides.policy.ratelimit.dev"} {
		if _, ok := r["CustomResourceDefinition"][crd]; !ok {
			t.Errorf("config/default does not install the CRD %s", crd)
		}
	}
}

func checkWebhook(t *testing.T, name string, fp *admissionregistrationv1.FailurePolicyType, se *admissionregistrationv1.SideEffectClass,
	timeout *int32, mp *admissionregistrationv1.MatchPolicyType, cc admissionregistrationv1.WebhookClientConfig, path string) {
	t.Helper()
	if fp == nil || *fp != admissionregistrationv1.Fail {
		t.Errorf("%s: failurePolicy %v, want Fail", name, fp)
	}
	if se == nil || *se != admissionregistrationv1.SideEffectClassNone {
		t.Errorf("%s: sideEffects %v, want None", name, se)
	}
	if timeout == nil || *timeout != 5 {
		t.Errorf("%s: timeoutSeconds %v, want 5", name, timeout)
	}
	if mp == nil || *mp != admissionregistrationv1.Equivalent {
		t.Errorf("%s: matchPolicy %v, want Equivalent", name, mp)
	}
	s := cc.Service
	if s == nil || s.Name != webhookService || s.Namespace != installNamespace || s.Path == nil || *s.Path != path {
		t.Errorf("%s: service reference %+v, want %s/%s%s", name, s, installNamespace, webhookService, path)
	}
}

// TestKustomizeDefaultServiceReachesManager: the webhook Service sends 443 to the manager
// pods' webhook port 9443.
func TestKustomizeDefaultServiceReachesManager(t *testing.T) {
	r := renderDefault(t)
	var svc corev1.Service
	r.get(t, "Service", webhookService, &svc)
	dep := managerDeployment(t, r)
	if svc.Namespace != installNamespace || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 ||
		svc.Spec.Ports[0].TargetPort != intstr.FromInt32(9443) {
		t.Errorf("service %s/%s ports %+v: want 443 -> 9443 in %s", svc.Namespace, svc.Name, svc.Spec.Ports, installNamespace)
	}
	if len(svc.Spec.Selector) == 0 {
		t.Errorf("service has no selector")
	}
	labels := dep.Spec.Template.Labels
	for k, v := range svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("service selector %s=%s does not match the manager pods (labels %v)", k, v, labels)
		}
	}
	ports := dep.Spec.Template.Spec.Containers[0].Ports
	if !slices.ContainsFunc(ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 9443 }) {
		t.Errorf("manager does not expose the webhook port 9443: %+v", ports)
	}
}

// TestKustomizeDefaultManagerLockedDown: the manager runs non-root on a read-only root file
// system, probes :8081, and mounts the serving certificate where controller-runtime reads it.
func TestKustomizeDefaultManagerLockedDown(t *testing.T) {
	r := renderDefault(t)
	dep := managerDeployment(t, r)
	pod := dep.Spec.Template.Spec
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("pod does not require a non-root user: %+v", psc)
	}
	mgr := pod.Containers[0]
	sc := mgr.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("manager container not locked down: %+v", sc)
	}
	for probe, p := range map[string]*corev1.Probe{"liveness": mgr.LivenessProbe, "readiness": mgr.ReadinessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Port != intstr.FromInt32(8081) {
			t.Errorf("%s probe %+v: want an HTTP probe on 8081", probe, p)
		}
	}
	if !mountsSecret(pod, certDir, "webhook-server-cert") {
		t.Errorf("no volume from secret webhook-server-cert mounted at %s: mounts %+v, volumes %+v", certDir, mgr.VolumeMounts, pod.Volumes)
	}
}

// mountsSecret reports whether the pod's first container mounts the secret at path.
func mountsSecret(pod corev1.PodSpec, path, secret string) bool {
	i := slices.IndexFunc(pod.Containers[0].VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.MountPath == path })
	if i < 0 {
		return false
	}
	volume := pod.Containers[0].VolumeMounts[i].Name
	return slices.ContainsFunc(pod.Volumes, func(v corev1.Volume) bool {
		return v.Name == volume && v.Secret != nil && v.Secret.SecretName == secret
	})
}

// managerDeployment is the rendered manager Deployment, in the install namespace, with one
// container.
func managerDeployment(t *testing.T, r rendered) *appsv1.Deployment {
	t.Helper()
	var dep appsv1.Deployment
	r.get(t, "Deployment", "ratelimit-controller-manager", &dep)
	if dep.Namespace != installNamespace || len(dep.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("deployment %s/%s with %d containers: want one manager container in %s",
			dep.Namespace, dep.Name, len(dep.Spec.Template.Spec.Containers), installNamespace)
	}
	return &dep
}

// TestKustomizeDefaultAcceptedByAPIServer: the API server validates what kustomize rendered
// (server-side dry run; cert-manager's kinds are not installed in envtest).
func TestKustomizeDefaultAcceptedByAPIServer(t *testing.T) {
	r := renderDefault(t)
	dryRunRendered(t, r, decoded[corev1.Service](t, r, "Service", webhookService), managerDeployment(t, r),
		decoded[admissionregistrationv1.MutatingWebhookConfiguration](t, r, "MutatingWebhookConfiguration", "ratelimit-mutating-webhook-configuration"),
		decoded[admissionregistrationv1.ValidatingWebhookConfiguration](t, r, "ValidatingWebhookConfiguration", "ratelimit-validating-webhook-configuration"))
}

// dryRunRendered has the API server validate rendered objects (server-side dry run) in the
// rendered install namespace, which it creates for real.
func dryRunRendered(t *testing.T, r rendered, objs ...client.Object) {
	t.Helper()
	e := suite.Env(t)
	ctx := context.Background()
	ns := &corev1.Namespace{}
	r.get(t, "Namespace", installNamespace, ns)
	if err := e.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", installNamespace, err)
	}
	for _, obj := range objs {
		if err := e.Client.Create(ctx, obj, client.DryRunAll); err != nil {
			t.Errorf("API server refuses rendered %T %s: %v", obj, obj.GetName(), err)
		}
	}
}
