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
	j.grant(t, plugin, server)
}

// grant has support staff unblock the quota's caller: refused while bound to usage-reader
// only (403, no update), then bound also to the chart's usage-editor ClusterRole, `kubectl
// ratelimit grant` of 1; the example app's sidecar admits the caller once more within its
// deny cache's hold, then refuses again, and the grant is an Event on the policy naming the
// ServiceAccount.
func (j *journey) grant(t *testing.T, plugin, server string) {
	c := j.c
	grant := func() (string, error) {
		token := strings.TrimSpace(kc(t, c, "-n", watchNS, "create", "token", "e2e-support"))
		out, err := exec.CommandContext(t.Context(), plugin, "grant", "-n", watchNS, "daily-quota", j.quotaUser, "1",
			"--request-id", "e2e-grant-"+j.run, "--server", server, "--insecure-skip-tls-verify", "--token", token,
			"-o", "json").CombinedOutput()
		return string(out), err
	}
	if out, err := grant(); err == nil || !strings.Contains(out, "403") {
		t.Fatalf("a grant by a usage-reader: %v: %s; want refused 403", err, out)
	}
	kc(t, c, "-n", watchNS, "create", "rolebinding", "e2e-support-grant", "--clusterrole="+release+"-usage-editor",
		"--serviceaccount="+watchNS+":e2e-support")
	wait.Eventually(t, time.Minute, "support to grant the quota's caller 1", func() error {
		out, err := grant()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		if !strings.Contains(out, `"applied": 1`) {
			return fmt.Errorf("want 1 applied: %s", out)
		}
		return nil
	})
	var codes []int
	wait.Eventually(t, 30*time.Second, "the quota's caller admitted again", func() error {
		j.seq++
		r, err := j.s.get(t.Context(), watchNS, "echo", "/daily", map[string]string{"X-User": j.quotaUser, "X-API-Key": fmt.Sprintf("k-%s-%d", j.run, j.seq)})
		if err != nil {
			return err
		}
		if r.status != 200 {
			return fmt.Errorf("still %d", r.status)
		}
		return nil
	})
	j.seq++
	r, err := j.s.get(t.Context(), watchNS, "echo", "/daily", map[string]string{"X-User": j.quotaUser, "X-API-Key": fmt.Sprintf("k-%s-%d", j.run, j.seq)})
	if err != nil || r.status != 429 {
		t.Fatalf("after the granted request: %v %v; want 429 (a grant of 1)", r.status, err)
	}
	codes = append(codes, 200, r.status)
	events := kc(t, c, "-n", watchNS, "get", "events.events.k8s.io", "--field-selector", "reason=UsageGranted", "-o", "jsonpath={.items[*].note}")
	if !strings.Contains(events, "system:serviceaccount:"+watchNS+":e2e-support") {
		t.Fatalf("no UsageGranted event by e2e-support: %q", events)
	}
	t.Logf("granted 1 to the quota's caller: %v; event: %s", codes, events)
}
