package inject_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
)

// TestModes: each mode runs the sidecar with its one front on its port and every other
// front off, the mounted snapshot and the metrics port; proxy mode forwards to the app's port,
// named or numbered, and declares its listening port for the Service.
func TestModes(t *testing.T) {
	common := []string{"--forward-auth-bind-address=", "--metrics-bind-address=:9090", "--snapshot-file=/etc/ratelimit/snapshot.json"}
	for name, tc := range map[string]struct {
		annotations map[string]string
		args        []string
		ports       []int32
	}{
		"proxy by port name (mode defaulted)": {
			annotations: map[string]string{inject.AnnotationUpstreamPort: "http"},
			args:        []string{"--proxy-bind-address=:8000", "--upstream=http://127.0.0.1:9376", "--grpc-bind-address=", "--http-bind-address="},
			ports:       []int32{8000, 9090},
		},
		"proxy by port number on another proxy port": {
			annotations: map[string]string{inject.AnnotationMode: "proxy", inject.AnnotationUpstreamPort: "9376", inject.AnnotationProxyPort: "8100"},
			args:        []string{"--proxy-bind-address=:8100", "--upstream=http://127.0.0.1:9376", "--grpc-bind-address=", "--http-bind-address="},
			ports:       []int32{8100, 9090},
		},
		"envoy": {
			annotations: map[string]string{inject.AnnotationMode: "envoy"},
			args:        []string{"--grpc-bind-address=127.0.0.1:8081", "--http-bind-address="},
			ports:       []int32{9090},
		},
		"check (explicit)": {
			annotations: map[string]string{inject.AnnotationMode: "check"},
			args:        []string{"--http-bind-address=127.0.0.1:8080", "--grpc-bind-address="},
			ports:       []int32{9090},
		},
		"check (default without an upstream port)": {
			args:  []string{"--http-bind-address=127.0.0.1:8080", "--grpc-bind-address="},
			ports: []int32{9090},
		},
	} {
		t.Run(name, func(t *testing.T) {
			sc := sidecarOf(t, mustInject(t, appPod(tc.annotations)))
			want := slices.Sorted(slices.Values(append(tc.args, common...)))
			if got := slices.Sorted(slices.Values(sc.Args)); !slices.Equal(got, want) {
				t.Errorf("args\n got %q\nwant %q", got, want)
			}
			var ports []int32
			for _, p := range sc.Ports {
				ports = append(ports, p.ContainerPort)
			}
			if !slices.Equal(ports, tc.ports) {
				t.Errorf("declared ports %v, want %v", ports, tc.ports)
			}
		})
	}
}

// TestSidecarShape: a native sidecar (restartPolicy Always) of the installation's image,
// probed on its metrics port, with POD_NAMESPACE from the downward API and GOMEMLIMIT below
// its memory limit, and the Pod labelled for
// `kubectl get pods -l ratelimit.dev/injected=true -L ratelimit.dev/sidecar-version`.
func TestSidecarShape(t *testing.T) {
	pod := mustInject(t, appPod(map[string]string{inject.AnnotationUpstreamPort: "http"}))
	sc := sidecarOf(t, pod)
	if sc.RestartPolicy == nil || *sc.RestartPolicy != corev1.ContainerRestartPolicyAlways {
		t.Errorf("restartPolicy %v: want Always (a native sidecar)", sc.RestartPolicy)
	}
	if sc.Image != testImage || sc.ImagePullPolicy != corev1.PullIfNotPresent || !slices.Equal(sc.Command, []string{"/usr/local/bin/sidecar"}) {
		t.Errorf("image %s pull %s command %v", sc.Image, sc.ImagePullPolicy, sc.Command)
	}
	checkProbe(t, "startup", sc.StartupProbe, "/readyz")
	checkProbe(t, "readiness", sc.ReadinessProbe, "/readyz")
	checkProbe(t, "liveness", sc.LivenessProbe, "/healthz")
	wantEnv := []corev1.EnvVar{
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "GOMEMLIMIT", Value: "100MiB"},
	}
	if !reflect.DeepEqual(sc.Env, wantEnv) {
		t.Errorf("env %+v, want %+v", sc.Env, wantEnv)
	}
	if sc.Resources.Requests.Cpu().String() != "50m" || sc.Resources.Limits.Memory().String() != "128Mi" {
		t.Errorf("resources %+v", sc.Resources)
	}
	if pod.Labels[inject.LabelInjected] != "true" || pod.Labels[inject.LabelSidecarVersion] != "v1.2.3_abc" ||
		pod.Annotations[inject.AnnotationSidecarImage] != testImage {
		t.Errorf("labels %v annotations %v", pod.Labels, pod.Annotations)
	}
}

// checkProbe fails unless p is an HTTP GET of path on the metrics port 9090.
func checkProbe(t *testing.T, what string, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path || p.HTTPGet.Port.IntValue() != 9090 {
		t.Errorf("%s probe %+v: want GET %s on 9090", what, p, path)
	}
}

// TestSidecarVolumes: the snapshot and credentials are mounted read-only from optional
// volumes of the namespace's ConfigMap and Secret, and --redis-credentials-path is passed
// only when the installation says Redis needs AUTH.
func TestSidecarVolumes(t *testing.T) {
	pod := mustInject(t, appPod(nil))
	sc := sidecarOf(t, pod)
	wantVolumes := []corev1.Volume{
		{Name: "ratelimit-snapshot", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "ratelimit-snapshot"}, Optional: ptr.To(true)}}},
		{Name: "ratelimit-redis-credentials", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "ratelimit-redis-credentials", Optional: ptr.To(true)}}},
	}
	if got := pod.Spec.Volumes[len(pod.Spec.Volumes)-2:]; !reflect.DeepEqual(got, wantVolumes) {
		t.Errorf("volumes %+v, want %+v", got, wantVolumes)
	}
	wantMounts := []corev1.VolumeMount{
		{Name: "ratelimit-snapshot", MountPath: "/etc/ratelimit", ReadOnly: true},
		{Name: "ratelimit-redis-credentials", MountPath: "/var/run/secrets/ratelimit/redis", ReadOnly: true},
	}
	if !reflect.DeepEqual(sc.VolumeMounts, wantMounts) {
		t.Errorf("mounts %+v, want %+v", sc.VolumeMounts, wantMounts)
	}
	if slices.ContainsFunc(sc.Args, func(a string) bool { return strings.HasPrefix(a, "--redis-credentials-path") }) {
		t.Errorf("args %v pass credentials the installation did not ask for", sc.Args)
	}
	cfg := config()
	cfg.RedisCredentials = true
	res, err := inject.Inject(appPod(nil), optedIn, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if args := sidecarOf(t, res.Pod).Args; !slices.Contains(args, "--redis-credentials-path=/var/run/secrets/ratelimit/redis") {
		t.Errorf("args %v: want --redis-credentials-path with RedisCredentials", args)
	}
}

// TestOptInPrecedence: the Pod's "disabled" (label or annotation) beats every opt-in; the
// Pod's "enabled" (label or annotation) opts it in without its namespace; the namespace label
// opts in every other Pod; nothing opted in injects nothing.
func TestOptInPrecedence(t *testing.T) {
	for name, tc := range map[string]struct {
		ns, labels, annotations map[string]string
		want                    bool
	}{
		"nothing":                          {want: false},
		"namespace label":                  {ns: optedIn, want: true},
		"namespace label of another value": {ns: map[string]string{inject.LabelInject: "true"}, want: false},
		"pod label":                        {labels: map[string]string{inject.LabelInject: "enabled"}, want: true},
		"pod annotation":                   {annotations: map[string]string{inject.LabelInject: "enabled"}, want: true},
		"pod label disabled in opted-in namespace":      {ns: optedIn, labels: map[string]string{inject.LabelInject: "disabled"}, want: false},
		"pod annotation disabled in opted-in namespace": {ns: optedIn, annotations: map[string]string{inject.LabelInject: "disabled"}, want: false},
		"pod label enabled, annotation disabled":        {labels: map[string]string{inject.LabelInject: "enabled"}, annotations: map[string]string{inject.LabelInject: "disabled"}, want: false},
	} {
		t.Run(name, func(t *testing.T) {
			pod := appPod(tc.annotations)
			for k, v := range tc.labels {
				pod.Labels[k] = v
			}
			res, err := inject.Inject(pod, tc.ns, config())
			if err != nil {
				t.Fatal(err)
			}
			if res.Inject != tc.want || (res.Pod != nil) != tc.want || res.Reason == "" {
				t.Errorf("inject %v (pod %v, reason %q), want %v", res.Inject, res.Pod != nil, res.Reason, tc.want)
			}
		})
	}
}

// TestBadAnnotationsDenied: every malformed, unknown, out-of-bounds or colliding annotation
// is an *AnnotationError naming it, whose message names it too.
func TestBadAnnotationsDenied(t *testing.T) {
	for name, tc := range map[string]struct {
		annotations map[string]string
		named       string
		says        string
	}{
		"unknown mode":                {map[string]string{inject.AnnotationMode: "sidecar"}, inject.AnnotationMode, "proxy, envoy, check"},
		"upstream port name unknown":  {map[string]string{inject.AnnotationUpstreamPort: "grpc"}, inject.AnnotationUpstreamPort, "no container port"},
		"upstream port number absent": {map[string]string{inject.AnnotationUpstreamPort: "8080"}, inject.AnnotationUpstreamPort, "no container port"},
		"proxy without upstream":      {map[string]string{inject.AnnotationMode: "proxy"}, inject.AnnotationUpstreamPort, "required"},
		"upstream in envoy mode":      {map[string]string{inject.AnnotationMode: "envoy", inject.AnnotationUpstreamPort: "http"}, inject.AnnotationUpstreamPort, "only used in proxy"},
		"cpu above max":               {map[string]string{inject.AnnotationCPU: "2"}, inject.AnnotationCPU, "maximum"},
		"memory above max":            {map[string]string{inject.AnnotationMemory: "1Gi"}, inject.AnnotationMemory, "maximum"},
		"memory not a quantity":       {map[string]string{inject.AnnotationMemory: "lots"}, inject.AnnotationMemory, "not a quantity"},
		"cpu zero":                    {map[string]string{inject.AnnotationCPU: "0"}, inject.AnnotationCPU, "more than 0"},
		"proxy port not a number":     {map[string]string{inject.AnnotationUpstreamPort: "http", inject.AnnotationProxyPort: "http"}, inject.AnnotationProxyPort, "port number"},
		"proxy port is the app's":     {map[string]string{inject.AnnotationUpstreamPort: "http", inject.AnnotationProxyPort: "9376"}, inject.AnnotationProxyPort, "container app's port"},
		"metrics port is the proxy's": {map[string]string{inject.AnnotationUpstreamPort: "http", inject.AnnotationMetricsPort: "8000"}, inject.AnnotationMetricsPort, "also the sidecar's"},
		"inject value unknown":        {map[string]string{inject.LabelInject: "yes"}, inject.LabelInject, `"enabled" or "disabled"`},
	} {
		t.Run(name, func(t *testing.T) {
			res, err := inject.Inject(appPod(tc.annotations), optedIn, config())
			var ae *inject.AnnotationError
			if !errors.As(err, &ae) {
				t.Fatalf("got %v (injected %v), want an *AnnotationError", err, res.Inject)
			}
			if ae.Annotation != tc.named || !strings.Contains(err.Error(), tc.named) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("error %q on %s: want it on %s saying %q", err, ae.Annotation, tc.named, tc.says)
			}
		})
	}
}

// TestOverridesWithinBounds: requests up to the maximum are taken; limits stay the
// installation's.
func TestOverridesWithinBounds(t *testing.T) {
	sc := sidecarOf(t, mustInject(t, appPod(map[string]string{inject.AnnotationCPU: "500m", inject.AnnotationMemory: "64Mi"})))
	r := sc.Resources
	if r.Requests.Cpu().Cmp(resource.MustParse("500m")) != 0 || r.Requests.Memory().Cmp(resource.MustParse("64Mi")) != 0 ||
		r.Limits.Cpu().Cmp(resource.MustParse("500m")) != 0 || r.Limits.Memory().Cmp(resource.MustParse("128Mi")) != 0 {
		t.Errorf("resources %+v", r)
	}
}

// TestOtherRefusals: a hostNetwork Pod and a Pod with a volume of the sidecar's name are
// refused rather than injected wrongly.
func TestOtherRefusals(t *testing.T) {
	host := appPod(nil)
	host.Spec.HostNetwork = true
	clash := appPod(nil)
	clash.Spec.Volumes = append(clash.Spec.Volumes, corev1.Volume{Name: inject.SnapshotVolume})
	for name, pod := range map[string]*corev1.Pod{"hostNetwork": host, "volume name": clash} {
		if res, err := inject.Inject(pod, optedIn, config()); err == nil {
			t.Errorf("%s: injected %v without error", name, res.Inject)
		}
	}
}

// TestIdempotent: a Pod injected once is left alone the second time, and the Pod passed in
// is never modified.
func TestIdempotent(t *testing.T) {
	pod := appPod(map[string]string{inject.AnnotationUpstreamPort: "http"})
	before := pod.DeepCopy()
	once := mustInject(t, pod)
	if !reflect.DeepEqual(pod, before) {
		t.Fatal("Inject modified the pod passed in")
	}
	res, err := inject.Inject(once, optedIn, config())
	if err != nil || res.Inject || res.Pod != nil || !strings.Contains(res.Reason, "already") {
		t.Errorf("second injection: %+v, %v; want skipped as already injected", res, err)
	}
}

// TestAppUnchanged: removing exactly the additions gives back the submitted Pod, deep-equal
// and as JSON, for Pods with and without labels and annotations.
func TestAppUnchanged(t *testing.T) {
	bare := appPod(map[string]string{inject.LabelInject: "enabled"})
	bare.Labels, bare.Annotations = nil, map[string]string{inject.LabelInject: "enabled"}
	noAnnotations := appPod(nil)
	noAnnotations.Labels[inject.LabelInject] = "enabled"
	for name, pod := range map[string]*corev1.Pod{
		"proxy":                 appPod(map[string]string{inject.AnnotationUpstreamPort: "http"}),
		"no labels":             bare,
		"no annotations":        noAnnotations,
		"no app init container": func() *corev1.Pod { p := appPod(nil); p.Spec.InitContainers = nil; return p }(),
	} {
		t.Run(name, func(t *testing.T) {
			res, err := inject.Inject(pod, optedIn, config())
			if err != nil || !res.Inject {
				t.Fatalf("inject: %+v %v", res, err)
			}
			got := stripInjection(res.Pod, pod.Labels != nil, pod.Annotations != nil)
			if !reflect.DeepEqual(got, pod) {
				t.Errorf("after removing the additions the pod differs:\n got %+v\nwant %+v", got, pod)
			}
			gj, _ := json.Marshal(got)
			pj, _ := json.Marshal(pod)
			if string(gj) != string(pj) {
				t.Errorf("JSON differs:\n got %s\nwant %s", gj, pj)
			}
		})
	}
}

// TestLabelValue: versions become valid label values.
func TestLabelValue(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3":                 "v1.2.3",
		"v1.2.3+abc":             "v1.2.3_abc",
		"(devel)":                "devel",
		"":                       "unknown",
		"+++":                    "unknown",
		strings.Repeat("a", 70):  strings.Repeat("a", 63),
		"v0.0.0-2026-01-01-abc/": "v0.0.0-2026-01-01-abc",
	} {
		if got := inject.LabelValue(in); got != want {
			t.Errorf("LabelValue(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestConfigValidate: the defaults pass; a missing image, a maximum above the limit and a
// port out of range are refused.
func TestConfigValidate(t *testing.T) {
	if err := config().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for name, mutate := range map[string]func(*inject.Config){
		"no image":               func(c *inject.Config) { c.Image = "" },
		"pull policy":            func(c *inject.Config) { c.PullPolicy = "Sometimes" },
		"max memory above limit": func(c *inject.Config) { c.Max.Memory = resource.MustParse("1Gi") },
		"request above max":      func(c *inject.Config) { c.Requests.CPU = resource.MustParse("1") },
		"port":                   func(c *inject.Config) { c.Ports.Metrics = 0 },
	} {
		c := config()
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
