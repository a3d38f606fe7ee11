// Package install checks what a user installs: the kustomizations under config/ rendered by
// kubectl and applied (dry run) to a real kube-apiserver with the webhooks serving, the RBAC
// they grant used for real, and the manager binary starting against the API server.
package install

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// suite is the control plane with the webhooks serving, so policies draw their warnings.
var suite = &kube.Suite{Name: "install", Webhooks: true}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
