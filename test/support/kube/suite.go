package kube

import (
	"fmt"
	"os"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// Suite is the control plane one test binary shares: TestMain calls Run, each test calls Env.
type Suite struct {
	// Name prefixes the suite's messages on stderr.
	Name string
	// Webhooks serves the operator's admission webhooks in-process (StartWebhooks).
	Webhooks bool
	// CRDs, when set, is called before the start for more CRD files or directories to install
	// beside the operator's (not with Webhooks); its error is the control plane's start error.
	CRDs func() ([]string, error)
	// Aggregation configures kube-apiserver's aggregation layer (front-proxy CA and proxy
	// client certificate: Aggregation), for APIServices served by a test (not with Webhooks).
	Aggregation bool

	env *Env
	agg *controlplane.Aggregation
	err error
}

// Run starts the control plane, runs the tests and stops it again, returning the exit code
// for os.Exit. A control plane that does not start is reported here and then by each test.
func (s *Suite) Run(m *testing.M) int {
	s.env, s.err = s.start()
	if s.err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, s.err)
	}
	code := m.Run()
	if err := s.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
	}
	s.agg.Remove()
	return code
}

// start starts the control plane: with the webhooks, or with the CRDs s.CRDs names and the
// aggregation layer when asked.
func (s *Suite) start() (*Env, error) {
	if s.Webhooks {
		return StartWebhooks()
	}
	var opts []func(*envtest.Environment)
	if s.CRDs != nil {
		paths, err := s.CRDs()
		if err != nil {
			return nil, err
		}
		opts = append(opts, func(te *envtest.Environment) {
			te.CRDDirectoryPaths = append(te.CRDDirectoryPaths, paths...)
		})
	}
	if s.Aggregation {
		var err error
		if s.agg, err = controlplane.NewAggregation(); err != nil {
			return nil, err
		}
		opts = append(opts, s.agg.Configure)
	}
	e, err := Start(opts...)
	if err != nil {
		return nil, err
	}
	e.Aggregation = s.agg
	return e, nil
}

// Env returns the shared control plane, as Require decides: it fails the test (CI) or skips
// it when there is none, and fails it when the control plane started but its setup did not.
func (s *Suite) Env(t testing.TB) *Env {
	t.Helper()
	return Require(t, s.env, s.err)
}
