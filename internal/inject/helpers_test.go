package inject_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// testImage and testVersion are the installation the tests inject with.
const (
	testImage   = "registry.example/ratelimit-operator:v1.2.3"
	testVersion = "v1.2.3+abc"
)

// config is the default Config with the test image and version.
func config() inject.Config { return inject.DefaultConfig(testImage, testVersion) }

// optedIn is the namespace label that opts every pod in.
var optedIn = map[string]string{inject.LabelInject: inject.ValueEnabled}

// appPod is a restricted-compliant pod of one app container serving port "http" (9376),
// with an app init container and volume of its own, and the annotations given.
func appPod(annotations map[string]string) *corev1.Pod {
	hardened := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: "apps", Labels: map[string]string{"app": "echo"}, Annotations: annotations},
		Spec: corev1.PodSpec{
			ServiceAccountName:           "echo",
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   ptr.To(true),
				RunAsUser:      ptr.To[int64](1000),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			InitContainers: []corev1.Container{{Name: "migrate", Image: "app:1", SecurityContext: hardened.DeepCopy()}},
			Containers: []corev1.Container{{
				Name: "app", Image: "app:1", SecurityContext: hardened,
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 9376, Protocol: corev1.ProtocolTCP}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// mustInject injects pod in an opted-in namespace and fails unless the sidecar was added.
func mustInject(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	res, err := inject.Inject(pod, optedIn, config())
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
	if !res.Inject || res.Pod == nil {
		t.Fatalf("not injected: %s", res.Reason)
	}
	return res.Pod
}

// sidecarOf returns the injected sidecar init container, failing when it is not the last one.
func sidecarOf(t *testing.T, pod *corev1.Pod) corev1.Container {
	t.Helper()
	ic := pod.Spec.InitContainers
	if len(ic) == 0 || ic[len(ic)-1].Name != inject.ContainerName {
		t.Fatalf("no %s as the last init container: %+v", inject.ContainerName, ic)
	}
	return ic[len(ic)-1]
}

// stripInjection removes what the injection adds: the sidecar, the ratelimit- volumes and
// the recording labels and annotation (and the maps when they were created for them).
func stripInjection(pod *corev1.Pod, hadLabels, hadAnnotations bool) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.InitContainers = out.Spec.InitContainers[:len(out.Spec.InitContainers)-1]
	if len(out.Spec.InitContainers) == 0 {
		out.Spec.InitContainers = nil // the pod had none
	}
	out.Spec.Volumes = out.Spec.Volumes[:len(out.Spec.Volumes)-2]
	delete(out.Labels, inject.LabelInjected)
	delete(out.Labels, inject.LabelSidecarVersion)
	delete(out.Annotations, inject.AnnotationSidecarImage)
	if !hadLabels && len(out.Labels) == 0 {
		out.Labels = nil
	}
	if !hadAnnotations && len(out.Annotations) == 0 {
		out.Annotations = nil
	}
	return out
}
