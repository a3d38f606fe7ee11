// Package envtest holds the suites that run against a real kube-apiserver + etcd with the
// operator's CRDs installed.
package envtest

import (
	"fmt"
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/kubetest"
)

var (
	env      *kubetest.Env
	startErr error
)

func TestMain(m *testing.M) {
	env, startErr = kubetest.Start()
	if startErr != nil {
		fmt.Fprintf(os.Stderr, "envtest: %v\n", startErr)
	}
	code := m.Run()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "envtest: %v\n", err)
	}
	os.Exit(code)
}

// kube returns the shared control plane, failing (CI) or skipping the test without one.
func kube(t *testing.T) *kubetest.Env {
	t.Helper()
	return kubetest.Require(t, env, startErr)
}
