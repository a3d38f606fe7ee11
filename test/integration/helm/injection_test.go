package helm_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// injectionConfig is the sidecar injection MutatingWebhookConfiguration the chart renders.
const injectionConfig = fullname + "-sidecar-injection"

// TestTemplateSidecarInjectionOff: by default there is no injection webhook and no
// --sidecar-* flag, and turning it on without the webhook server is refused.
func TestTemplateSidecarInjectionOff(t *testing.T) {
	objs := render(t, nil)
	if objs.find("MutatingWebhookConfiguration", "", injectionConfig) != nil {
		t.Error("default values render the sidecar injection webhook")
	}
	for _, a := range managerArgs(t, objs) {
		if strings.HasPrefix(a, "--sidecar-") {
			t.Errorf("default values pass %s", a)
		}
	}
	if out, err := template(t, nil, "sidecarInjection.enabled=true", "webhook.enabled=false"); err == nil || !strings.Contains(err.Error(), "needs webhook.enabled") {
		t.Errorf("injection without webhooks: err %v\n%.300s", err, out)
	}
}

// TestTemplateSidecarInjection: turned on, the chart renders two webhooks on Pod CREATE, both
// failurePolicy Fail with reinvocationPolicy Never, sideEffects None and a short timeout:
// Pods of opted-in namespaces that do not opt out, and Pods that opt in elsewhere; neither
// matches kube-system or the release namespace. They call the policy webhooks' Service with
// the same CA, and the manager gets the chart's image for the sidecar.
func TestTemplateSidecarInjection(t *testing.T) {
	objs := render(t, nil, "sidecarInjection.enabled=true")
	mwc := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs.get(t, "MutatingWebhookConfiguration", "", injectionConfig))
	policyMWC := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs.get(t, "MutatingWebhookConfiguration", "", fullname+"-mutating"))
	if len(mwc.Webhooks) != 2 {
		t.Fatalf("%d webhooks, want 2", len(mwc.Webhooks))
	}
	excluded := metav1.LabelSelectorRequirement{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", namespace}}
	want := map[string][2]metav1.LabelSelectorRequirement{ // namespace, object
		"namespace.inject.ratelimit.dev": {{Key: "ratelimit.dev/inject", Operator: metav1.LabelSelectorOpIn, Values: []string{"enabled"}},
			{Key: "ratelimit.dev/inject", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"disabled"}}},
		"pod.inject.ratelimit.dev": {{Key: "ratelimit.dev/inject", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"enabled"}},
			{Key: "ratelimit.dev/inject", Operator: metav1.LabelSelectorOpIn, Values: []string{"enabled"}}},
	}
	for _, w := range mwc.Webhooks {
		sel, ok := want[w.Name]
		if !ok {
			t.Errorf("unexpected webhook %s", w.Name)
			continue
		}
		checkSelectors(t, w, []metav1.LabelSelectorRequirement{sel[0], excluded}, []metav1.LabelSelectorRequirement{sel[1]})
		checkInjectionWebhook(t, w)
		if !bytes.Equal(w.ClientConfig.CABundle, policyMWC.Webhooks[0].ClientConfig.CABundle) || len(w.ClientConfig.CABundle) == 0 {
			t.Errorf("%s: caBundle is not the policy webhooks' CA", w.Name)
		}
	}
	args := managerArgs(t, objs)
	for _, a := range []string{"--sidecar-injection", "--sidecar-image=ratelimit-operator:" + chartAppVersion(t), "--sidecar-image-pull-policy=IfNotPresent"} {
		if !slices.Contains(args, a) {
			t.Errorf("manager args %q lack %s", args, a)
		}
	}
}

// TestTemplateSidecarInjectionCustom: custom.yaml's values reach the manager's flags and the
// webhooks' exclusions and timeout.
func TestTemplateSidecarInjectionCustom(t *testing.T) {
	objs := render(t, []string{customValues})
	args := managerArgs(t, objs)
	for _, a := range []string{"--sidecar-image=ghcr.io/example/ratelimit-sidecar:v9.9.8", "--sidecar-image-pull-policy=Always",
		"--sidecar-cpu-request=20m", "--sidecar-memory-request=24Mi", "--sidecar-cpu-limit=1", "--sidecar-memory-limit=256Mi",
		"--sidecar-max-cpu=200m", "--sidecar-max-memory=96Mi", "--sidecar-proxy-port=8100", "--sidecar-metrics-port=9190",
		"--sidecar-grpc-port=8181", "--sidecar-check-port=8180", "--sidecar-redis-credentials"} {
		if !slices.Contains(args, a) {
			t.Errorf("manager args %q lack %s", args, a)
		}
	}
	mwc := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, objs.get(t, "MutatingWebhookConfiguration", "", injectionConfig))
	for _, w := range mwc.Webhooks {
		if got := w.NamespaceSelector.MatchExpressions[1].Values; !slices.Equal(got, []string{"kube-system", namespace, "monitoring"}) {
			t.Errorf("%s excludes %v", w.Name, got)
		}
		if w.TimeoutSeconds == nil || *w.TimeoutSeconds != 3 || w.ClientConfig.CABundle != nil {
			t.Errorf("%s: timeout %v, caBundle set %v (cert-manager injects it)", w.Name, w.TimeoutSeconds, w.ClientConfig.CABundle != nil)
		}
	}
}

// checkSelectors fails unless w selects exactly ns and obj.
func checkSelectors(t *testing.T, w admissionregistrationv1.MutatingWebhook, ns, obj []metav1.LabelSelectorRequirement) {
	t.Helper()
	same(t, w.Name+" namespaceSelector", w.NamespaceSelector, &metav1.LabelSelector{MatchExpressions: ns})
	same(t, w.Name+" objectSelector", w.ObjectSelector, &metav1.LabelSelector{MatchExpressions: obj})
}

// checkInjectionWebhook fails unless w is Pod CREATE on the webhook Service's /inject-v1-pod,
// failurePolicy Fail, reinvocationPolicy Never, sideEffects None, within 5 s.
func checkInjectionWebhook(t *testing.T, w admissionregistrationv1.MutatingWebhook) {
	t.Helper()
	svc := w.ClientConfig.Service
	if svc == nil || svc.Name != fullname+"-webhook" || svc.Namespace != namespace || svc.Path == nil || *svc.Path != "/inject-v1-pod" {
		t.Errorf("%s calls %+v", w.Name, w.ClientConfig)
	}
	if len(w.Rules) != 1 || !slices.Equal(w.Rules[0].Resources, []string{"pods"}) ||
		!slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) {
		t.Errorf("%s rules %+v: want pods CREATE only", w.Name, w.Rules)
	}
	if *w.FailurePolicy != admissionregistrationv1.Fail || *w.ReinvocationPolicy != admissionregistrationv1.NeverReinvocationPolicy ||
		*w.SideEffects != admissionregistrationv1.SideEffectClassNone || *w.TimeoutSeconds != 5 ||
		!slices.Equal(w.AdmissionReviewVersions, []string{"v1"}) {
		t.Errorf("%s: failurePolicy %s, reinvocation %s, sideEffects %s, timeout %d, versions %v", w.Name,
			*w.FailurePolicy, *w.ReinvocationPolicy, *w.SideEffects, *w.TimeoutSeconds, w.AdmissionReviewVersions)
	}
}
