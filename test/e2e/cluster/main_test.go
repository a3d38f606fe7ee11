// Package cluster_test runs the operator the way users run it, on a real Kubernetes: the
// image built from the Dockerfile, the Helm chart, the samples applied with kubectl, the
// sidecars in pods, Redis in a pod, traffic through Services, and faults (Redis deleted, the
// leader deleted, a rollout). By default on the single-node cluster hack/cluster/cluster.sh
// runs on this machine; with KUBECONFIG and E2E_IMAGE set (`make e2e`), on any cluster.
// Every namespace enforces the restricted Pod Security Standard.
package cluster_test

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/cluster"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
)

// suite is the cluster, started by the first test that needs it (so that `go test -run`
// of nothing here starts none) and stopped by TestMain.
var suite struct {
	once sync.Once
	c    *cluster.Cluster
	err  error
}

// measured collects the timings the suite reports (and the issue asks for) at the end.
var measured = struct {
	sync.Mutex
	m map[string]time.Duration
}{m: map[string]time.Duration{}}

func measure(what string, d time.Duration) {
	measured.Lock()
	defer measured.Unlock()
	measured.m[what] = d
}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	code := m.Run()
	if err := suite.c.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "cluster: down: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	report()
	return code
}

// report prints every timing measured, sorted by name.
func report() {
	measured.Lock()
	defer measured.Unlock()
	if len(measured.m) == 0 {
		return
	}
	names := make([]string, 0, len(measured.m))
	for k := range measured.m {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("cluster e2e timings:\n")
	for _, k := range names {
		fmt.Fprintf(&b, "  %-55s %8.1fs\n", k, measured.m[k].Seconds())
	}
	fmt.Fprint(os.Stderr, b.String())
}

// need is the cluster, or the end of the test for want of it (a failure under CI).
func need(t *testing.T) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		missing.Part(t, "a real cluster is not short (-short)")
	}
	suite.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		suite.c, suite.err = cluster.Start(ctx)
		if suite.err == nil {
			for k, v := range suite.c.Timings {
				measure(k, v)
			}
		}
	})
	if suite.err != nil {
		missing.Part(t, "no cluster: %v", suite.err)
	}
	return suite.c
}
