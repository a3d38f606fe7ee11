// Package webhook runs the RateLimitPolicy admission webhooks in-process behind a real
// kube-apiserver (envtest), which calls them over TLS exactly as a cluster would: the
// webhook configurations come from config/webhook/manifests.yaml, rewritten by envtest to
// point at the local webhook server.
package webhook

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// suite is the control plane with the webhooks serving.
var suite = &kube.Suite{Name: "webhook", Webhooks: true}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
