package kube

import (
	"fmt"
	"os"
	"testing"
)

// Suite is the control plane one test binary shares: TestMain calls Run, each test calls Env.
type Suite struct {
	// Name prefixes the suite's messages on stderr.
	Name string
	// Webhooks serves the operator's admission webhooks in-process (StartWebhooks).
	Webhooks bool

	env *Env
	err error
}

// Run starts the control plane, runs the tests and stops it again, returning the exit code
// for os.Exit. A control plane that does not start is reported here and then by each test.
func (s *Suite) Run(m *testing.M) int {
	if s.Webhooks {
		s.env, s.err = StartWebhooks()
	} else {
		s.env, s.err = Start()
	}
	if s.err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, s.err)
	}
	code := m.Run()
	if err := s.env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
	}
	return code
}

// Env returns the shared control plane, as Require decides: it fails the test (CI) or skips
// it when there is none, and fails it when the control plane started but its setup did not.
func (s *Suite) Env(t testing.TB) *Env {
	t.Helper()
	return Require(t, s.env, s.err)
}
