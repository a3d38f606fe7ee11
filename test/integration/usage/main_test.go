// Package usage tests the manager's usage API and the kubectl plugin that reads it, against a
// real kube-apiserver with RBAC (TokenReview and SubjectAccessReview on real ServiceAccount
// tokens), a real redis-server, and the manager binary.
package usage

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// suite's kube-apiserver runs with the aggregation layer configured, so that the usage API
// can be served as an APIService (aggregated_test.go).
var suite = &kube.Suite{Name: "usage", Aggregation: true}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
