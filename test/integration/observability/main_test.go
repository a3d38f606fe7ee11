// Package observability checks what operators watch: the alerts of
// charts/ratelimit-operator/files/alerts.yaml (promtool checks them, and runs a test per
// alert that fires and one that stays quiet), the Grafana dashboard of files/dashboard.json,
// and that every metric and label their PromQL names is one the real sidecar and manager
// binaries export, scraped from their /metrics after they have done real work.
package observability

import (
	"os"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// suite is the control plane the manager binary runs against.
var suite = &kube.Suite{Name: "observability"}

func TestMain(m *testing.M) { os.Exit(suite.Run(m)) }
