// Package api runs the RateLimitPolicy API itself against a real kube-apiserver + etcd with
// the operator's CRDs installed and no webhook: schema, CEL rules, server-side defaults,
// status subresource and the samples under config/samples.
package api

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// suite is the control plane with the CRDs and no webhook.
var suite = &kube.Suite{Name: "api"}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
