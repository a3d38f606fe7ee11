package cluster_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/missing"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// usage has support staff explain the calendar quota's 429s: a ServiceAccount of the
// watching namespace bound (RoleBinding) to the chart's usage-reader ClusterRole runs
// `kubectl ratelimit usage` against the installed manager's usage Service, and reads the
// quota's caller at 2 of 2 used; a ServiceAccount without the binding is refused 403.
func (j *journey) usage(t *testing.T) {
	c := j.c
	if !c.Local {
		missing.Part(t, "the plugin reaches the usage Service's ClusterIP directly, which only this machine's cluster routes from the test")
	}
	if j.quotaUser == "" {
		t.Fatal("the calendar quota step left no caller to read")
	}
	kc(t, c, "-n", watchNS, "create", "serviceaccount", "e2e-support")
	kc(t, c, "-n", watchNS, "create", "serviceaccount", "e2e-nosupport")
	kc(t, c, "-n", watchNS, "create", "rolebinding", "e2e-support", "--clusterrole="+release+"-usage-reader",
		"--serviceaccount="+watchNS+":e2e-support")
	base, err := j.s.url(t.Context(), system, release+"-usage", 8445)
	if err != nil {
		t.Fatal(err)
	}
	server := "https" + strings.TrimPrefix(base, "http")
	plugin := proc.MustBuild(t, "cmd/kubectl-ratelimit")
	read := func(sa string) (string, error) {
		token := strings.TrimSpace(kc(t, c, "-n", watchNS, "create", "token", sa))
		// The chart's usage API serves a self-signed certificate unless usageApi.certSecret
		// is set; the bearer token authenticates.
		out, err := exec.CommandContext(t.Context(), plugin, "usage", "-n", watchNS, "daily-quota", j.quotaUser,
			"--server", server, "--insecure-skip-tls-verify", "--token", token, "-o", "json").CombinedOutput()
		return string(out), err
	}
	wait.Eventually(t, time.Minute, "support to read the quota's caller", func() error {
		out, err := read("e2e-support")
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		var got struct {
			Allowed bool `json:"allowed"`
			Limits  []struct {
				Name      string `json:"name"`
				Used      int64  `json:"used"`
				Remaining int64  `json:"remaining"`
			} `json:"limits"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			return fmt.Errorf("not the usage API's JSON: %s: %w", out, err)
		}
		if got.Allowed || len(got.Limits) != 1 || got.Limits[0].Used != 2 || got.Limits[0].Remaining != 0 {
			return fmt.Errorf("want 2 of 2 used and denied: %s", out)
		}
		return nil
	})
	out, err := read("e2e-nosupport")
	if err == nil || !strings.Contains(out, "403") {
		t.Errorf("a ServiceAccount without the binding: %v: %s; want refused 403", err, out)
	}
}
