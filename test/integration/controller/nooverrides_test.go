package controller

import (
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// A Helm upgrade leaves the CRDs as they were (Helm installs crds/ once): a manager of this
// version on a cluster that has the RateLimitPolicy CRD and not yet the RateLimitOverride
// one must still start and publish policies, with overrides off, instead of failing to
// start (every policy edit would then wait for someone to apply the CRDs).
func TestManagerWithoutTheOverrideCRD(t *testing.T) {
	suite(t)
	env, err := kube.Start(func(te *envtest.Environment) {
		te.CRDDirectoryPaths = []string{filepath.Join(kube.RepoRoot(), "config", "crd", "bases", "policy.ratelimit.dev_ratelimitpolicies.yaml")}
	})
	e := kube.Require(t, env, err)
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	s := redistest.StartServer(t)
	m, err := startManager(e, s.Client(), standaloneTopology(s))
	if err != nil {
		t.Fatalf("the manager does not start without the RateLimitOverride CRD: %v", err)
	}
	t.Cleanup(m.stop)
	ns := kube.NewNamespace(t, e, "n-")
	create(t, e, newPolicy(ns, "plain", 10))
	waitReady(t, e, ns, "plain")
	waitSnapshot(t, e, ns, "plain")
}
