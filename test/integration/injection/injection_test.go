package injection

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
	"github.com/ratelimit-dev/ratelimit-operator/internal/webhook/podinject"
)

// upstream is the annotation that puts the proxy in front of agnhost's port.
var upstream = map[string]string{inject.AnnotationUpstreamPort: "upstream"}

// TestOptedInNamespaceGetsSidecar: a pod of a namespace labelled ratelimit.dev/inject=enabled
// is stored with the sidecar as a native sidecar in proxy mode, its volumes, and the labels and
// annotation recording the injection; the API server's restricted PodSecurity admission
// accepted it; its own container is stored as submitted (compared with the same pod in the
// release namespace, which the webhook never sees).
func TestOptedInNamespaceGetsSidecar(t *testing.T) {
	ns := namespace(t, "inject-ns-", optIn)
	before := calls(t)
	pod := create(t, agnhost(ns, nil, upstream))
	sawCalls(t, before, map[string]float64{podinject.ResultInjected: 1})
	sc := sidecar(pod)
	if sc == nil || len(pod.Spec.InitContainers) != 1 {
		t.Fatalf("stored pod has no sidecar init container: %+v", pod.Spec.InitContainers)
	}
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways || sc.Image != injectedImage {
		t.Errorf("sidecar restartPolicy %v image %s", sc.RestartPolicy, sc.Image)
	}
	if !strings.Contains(strings.Join(sc.Args, " "), "--upstream=http://127.0.0.1:9376") {
		t.Errorf("sidecar args %q do not proxy to the app's port", sc.Args)
	}
	if pod.Labels[inject.LabelInjected] != "true" || pod.Labels[inject.LabelSidecarVersion] != "v0.1.0_test" ||
		pod.Annotations[inject.AnnotationSidecarImage] != injectedImage {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
	control := create(t, agnhost(releaseNamespace(t), nil, upstream))
	if sidecar(control) != nil {
		t.Fatal("the release namespace's pod got the sidecar: the webhook must never match it")
	}
	if asSubmitted(t, control) == asSubmitted(t, pod) {
		t.Fatal("an injected pod compares equal to the control: the comparison cannot tell")
	}
	got, want := pod.Spec.DeepCopy(), control.Spec.DeepCopy()
	got.InitContainers, got.Volumes, want.Volumes = nil, nil, nil
	if asSubmitted(t, &corev1.Pod{Spec: *got}) != asSubmitted(t, &corev1.Pod{Spec: *want}) {
		t.Errorf("beyond the sidecar and its volumes the spec differs from the control:\n got %+v\nwant %+v", got, want)
	}
}

// TestNotOptedInStoredAsSubmitted: a pod without the label in a namespace without it is never
// sent to the webhook (it answers nothing) and is stored exactly as the same pod in the release
// namespace: spec, labels and annotations.
func TestNotOptedInStoredAsSubmitted(t *testing.T) {
	ns := namespace(t, "plain-", nil)
	before := calls(t)
	pod := create(t, agnhost(ns, nil, upstream))
	sawCalls(t, before, nil)
	control := create(t, agnhost(releaseNamespace(t), nil, upstream))
	if got, want := asSubmitted(t, pod), asSubmitted(t, control); got != want {
		t.Errorf("a pod that did not opt in is stored differently from the control:\n got %s\nwant %s", got, want)
	}
}

// TestOptedInPodInPlainNamespace: a pod labelled ratelimit.dev/inject=enabled gets the sidecar
// in a namespace that did not opt in, in the mode its annotation names.
func TestOptedInPodInPlainNamespace(t *testing.T) {
	ns := namespace(t, "plain-", nil)
	before := calls(t)
	pod := create(t, agnhost(ns, optIn, map[string]string{inject.AnnotationMode: "envoy"}))
	sawCalls(t, before, map[string]float64{podinject.ResultInjected: 1})
	sc := sidecar(pod)
	if sc == nil || !strings.Contains(strings.Join(sc.Args, " "), "--grpc-bind-address=127.0.0.1:8081") {
		t.Fatalf("no envoy-mode sidecar: %+v", sc)
	}
}

// TestOptOut: in an opted-in namespace, a pod labelled disabled is never sent to the webhook,
// and one annotated disabled is sent and left alone; both are stored as the control is.
func TestOptOut(t *testing.T) {
	ns := namespace(t, "inject-ns-", optIn)
	disabled := map[string]string{inject.LabelInject: inject.ValueDisabled}
	for name, tc := range map[string]struct {
		labels, annotations map[string]string
		calls               map[string]float64
	}{
		"label":      {labels: disabled, calls: nil},
		"annotation": {annotations: disabled, calls: map[string]float64{podinject.ResultSkipped: 1}},
	} {
		t.Run(name, func(t *testing.T) {
			before := calls(t)
			pod := create(t, agnhost(ns, tc.labels, tc.annotations))
			sawCalls(t, before, tc.calls)
			control := create(t, agnhost(releaseNamespace(t), tc.labels, tc.annotations))
			if got, want := asSubmitted(t, pod), asSubmitted(t, control); got != want {
				t.Errorf("opted-out pod stored differently from the control:\n got %s\nwant %s", got, want)
			}
		})
	}
}

// TestBadAnnotationRefused: a pod whose annotation the sidecar cannot be built from is refused
// with a message naming the annotation, and nothing is stored.
func TestBadAnnotationRefused(t *testing.T) {
	ns := namespace(t, "inject-ns-", optIn)
	for annotation, value := range map[string]string{inject.AnnotationMode: "sidecar", inject.AnnotationUpstreamPort: "grpc", inject.AnnotationMemory: "4Gi"} {
		before := calls(t)
		err := env(t).Client.Create(context.Background(), agnhost(ns, nil, map[string]string{annotation: value}))
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), annotation) {
			t.Errorf("%s=%s: got %v, want Forbidden naming the annotation", annotation, value, err)
		}
		sawCalls(t, before, map[string]float64{podinject.ResultDenied: 1})
	}
	var pods corev1.PodList
	if err := env(t).Client.List(context.Background(), &pods); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Namespace == ns {
			t.Errorf("refused pod %s was stored", p.Name)
		}
	}
}

// TestWebhookDown: with the webhook server stopped, a pod of an opted-in namespace and an
// opted-in pod are refused (failurePolicy Fail: no pod starts unprotected; its ReplicaSet
// retries), while a pod that did not opt in is created as ever. The server is started again.
func TestWebhookDown(t *testing.T) {
	optedNS := namespace(t, "inject-ns-", optIn)
	plainNS := namespace(t, "plain-", nil)
	suite.injector.stop()
	t.Cleanup(func() {
		if err := suite.injector.start(); err != nil {
			t.Errorf("restart the webhook: %v", err)
		}
	})
	c := env(t).Client
	for name, pod := range map[string]*corev1.Pod{
		"opted-in namespace": agnhost(optedNS, nil, upstream),
		"opted-in pod":       agnhost(plainNS, optIn, upstream),
	} {
		err := c.Create(context.Background(), pod)
		if err == nil || !strings.Contains(err.Error(), "inject.ratelimit.dev") {
			t.Errorf("%s: created with the webhook down (err %v); want the webhook's failure", name, err)
		}
	}
	if err := c.Create(context.Background(), agnhost(plainNS, nil, upstream)); err != nil {
		t.Errorf("a pod that did not opt in is refused with the webhook down: %v", err)
	}
}
