package inject_test

import (
	"testing"

	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// TestRestrictedPodSecurity: in every mode, a Pod whose own containers comply with the
// restricted Pod Security Standard still complies with the sidecar injected, as the real
// evaluator of k8s.io/pod-security-admission (latest version) judges it, even when the Pod
// itself does not say runAsNonRoot. The check is live: the same Pod with a sidecar that may
// escalate privileges fails it.
func TestRestrictedPodSecurity(t *testing.T) {
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	for _, annotations := range []map[string]string{
		{inject.AnnotationUpstreamPort: "http"}, {inject.AnnotationMode: "envoy"}, {inject.AnnotationMode: "check"},
	} {
		pod := appPod(annotations)
		if r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &pod.ObjectMeta, &pod.Spec)); !r.Allowed {
			t.Fatalf("the app pod itself is not restricted: %s", r.ForbiddenDetail())
		}
		// Container-level runAsNonRoot must carry the sidecar when the Pod does not say it.
		pod.Spec.SecurityContext.RunAsNonRoot = nil
		for i := range pod.Spec.Containers {
			pod.Spec.Containers[i].SecurityContext.RunAsNonRoot = ptr.To(true)
		}
		for i := range pod.Spec.InitContainers {
			pod.Spec.InitContainers[i].SecurityContext.RunAsNonRoot = ptr.To(true)
		}
		injected := mustInject(t, pod)
		if r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &injected.ObjectMeta, &injected.Spec)); !r.Allowed {
			t.Errorf("mode %v: injected pod is not restricted: %s: %s", annotations, r.ForbiddenReason(), r.ForbiddenDetail())
		}
		loose := injected.DeepCopy()
		loose.Spec.InitContainers[len(loose.Spec.InitContainers)-1].SecurityContext.AllowPrivilegeEscalation = nil
		if r := policy.AggregateCheckResults(eval.EvaluatePod(restricted, &loose.ObjectMeta, &loose.Spec)); r.Allowed {
			t.Error("the evaluator allowed a sidecar that may escalate privileges: the check is not live")
		}
	}
}
