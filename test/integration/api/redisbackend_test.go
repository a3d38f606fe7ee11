package api

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// baseBackendYAML is a valid RedisBackend; each invalid case below breaks one thing in it.
const baseBackendYAML = `
apiVersion: policy.ratelimit.dev/v1alpha1
kind: RedisBackend
metadata:
  name: base
spec:
  addrs: ["redis-isolated.ratelimit-system.svc:6379"]
  credentialsSecretRef: {namespace: ratelimit-system, name: redis-isolated-admin}
  tls: {enabled: true, caSecretRef: {namespace: ratelimit-system, name: redis-ca}, serverName: redis.internal}
  namespaceSelector:
    matchLabels: {ratelimit.dev/redis: isolated}
`

func baseBackend(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(baseBackendYAML), &m); err != nil {
		t.Fatalf("decode base backend: %v", err)
	}
	return &unstructured.Unstructured{Object: m}
}

var invalidBackends = []invalidCase{
	{"an empty namespaceSelector", setTo("spec.namespaceSelector", map[string]any{}),
		"spec.namespaceSelector", "an empty namespaceSelector selects nothing"},
	{"an empty matchLabels", setTo("spec.namespaceSelector", map[string]any{"matchLabels": map[string]any{}}),
		"spec.namespaceSelector", "an empty namespaceSelector selects nothing"},
	{"no addrs", setTo("spec.addrs", []any{}), "spec.addrs", "should have at least 1 items"},
	{"an address without a port", setTo("spec.addrs", []any{"redis"}), "spec.addrs[0]", "should match"},
	{"two addresses standalone", setTo("spec.addrs", []any{"a:6379", "b:6379"}),
		"spec.addrs", "mode Standalone takes exactly one address"},
	{"an unknown mode", setTo("spec.mode", "Replicated"), "spec.mode", "Unsupported value"},
	{"Sentinel without masterName", setTo("spec.mode", "Sentinel"), "spec.masterName", "mode Sentinel needs masterName"},
	{"masterName outside Sentinel", setTo("spec.masterName", "mymaster"), "spec.masterName", "masterName is for mode Sentinel only"},
	{"a database on Cluster", func(t *testing.T, o map[string]any) {
		set(t, o, "spec.mode", "Cluster")
		set(t, o, "spec.db", 3)
	}, "spec.db", "Redis Cluster has only database 0"},
	{"a negative database", setTo("spec.db", -1), "spec.db", "greater than or equal to 0"},
	{"a CA without TLS", setTo("spec.tls.enabled", false), "spec.tls", "caSecretRef and serverName need enabled: true"},
	{"a Secret without a namespace", setTo("spec.credentialsSecretRef", map[string]any{"name": "x"}),
		"spec.credentialsSecretRef.namespace", "Required value"},
}

// TestInvalidRedisBackendsRejected proves each broken RedisBackend is refused by the CRD's
// schema or CEL rules on the real API server, naming the field; the unbroken one and the
// sample under config/samples are accepted, with mode defaulted to Standalone.
func TestInvalidRedisBackendsRejected(t *testing.T) {
	e := suite.Env(t)
	suffix := rand.String(6)
	for i, tc := range append([]invalidCase{{name: "nothing"}}, invalidBackends...) {
		t.Run(tc.name, func(t *testing.T) {
			obj := baseBackend(t)
			obj.SetName(fmt.Sprintf("backend-%s-%d", suffix, i))
			if tc.mutate == nil { // the unbroken base
				createBackend(t, e, obj)
				return
			}
			tc.mutate(t, obj.Object)
			if err := e.Client.Create(context.Background(), obj); err == nil {
				_ = e.Client.Delete(context.Background(), obj)
				t.Fatalf("API server accepted a RedisBackend with %s", tc.name)
			} else {
				assertCause(t, err, tc.field, tc.msg)
			}
		})
	}
	sample := kube.ReadObject(t, filepath.Join(kube.RepoRoot(), "config", "samples", "redisbackend.yaml"))
	sample.SetName("sample-" + suffix)
	createBackend(t, e, sample)
	var got policyv1alpha1.RedisBackend
	if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(sample), &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Mode != policyv1alpha1.RedisModeStandalone || got.Spec.CredentialsSecretRef == nil ||
		len(got.Spec.NamespaceSelector.MatchLabels) == 0 {
		t.Errorf("the sample reads back as %+v", got.Spec)
	}
}

// createBackend creates a cluster-scoped object, deleted when the test ends.
func createBackend(t *testing.T, e *kube.Env, obj *unstructured.Unstructured) {
	t.Helper()
	if err := e.Client.Create(context.Background(), obj); err != nil {
		t.Fatalf("API server refused %s: %v", obj.GetName(), err)
	}
	t.Cleanup(func() { _ = e.Client.Delete(context.Background(), obj) })
}
