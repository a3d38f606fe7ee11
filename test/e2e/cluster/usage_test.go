package cluster_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// usage has support staff explain the calendar quota's 429s with `kubectl ratelimit usage`
// and nothing but a kubeconfig (the usage API served through the API server's aggregation
// layer, APIService v1alpha1.usage.ratelimit.dev): a ServiceAccount token user and a
// client-certificate user (signed through the CSR API), each bound (RoleBinding) to the
// chart's usage-reader ClusterRole, read the quota's caller at 2 of 2 used; a ServiceAccount
// without the binding is refused 403; `kubectl get --raw` reads the API too.
func (j *journey) usage(t *testing.T) {
	c := j.c
	if j.quotaUser == "" {
		t.Fatal("the calendar quota step left no caller to read")
	}
	t0 := time.Now()
	kc(t, c, "wait", "--for=condition=Available", "apiservice/v1alpha1.usage.ratelimit.dev", "--timeout=120s")
	measure("helm install → usage APIService Available", time.Since(j.helmStart))
	t.Logf("APIService Available %v after this step began", time.Since(t0))
	kc(t, c, "-n", watchNS, "create", "serviceaccount", "e2e-support")
	kc(t, c, "-n", watchNS, "create", "serviceaccount", "e2e-nosupport")
	kc(t, c, "-n", watchNS, "create", "rolebinding", "e2e-support", "--clusterrole="+release+"-usage-reader",
		"--serviceaccount="+watchNS+":e2e-support")
	certUser := "e2e-cert-support-" + j.run
	kc(t, c, "-n", watchNS, "create", "rolebinding", "e2e-cert-support", "--clusterrole="+release+"-usage-reader", "--user="+certUser)
	plugin := proc.MustBuild(t, "cmd/kubectl-ratelimit")
	users := map[string]string{
		"token e2e-support":       j.tokenKubeconfig(t, "e2e-support"),
		"certificate " + certUser: j.certKubeconfig(t, certUser),
	}
	for who, kcfg := range users {
		wait.Eventually(t, time.Minute, who+" to read the quota's caller", func() error {
			out, err := exec.CommandContext(t.Context(), plugin, "--kubeconfig", kcfg, "usage", "-n", watchNS,
				"daily-quota", j.quotaUser, "-o", "json").CombinedOutput()
			if err != nil {
				return fmt.Errorf("%w: %s", err, out)
			}
			return twoOfTwoUsed(out)
		})
	}
	out, err := exec.CommandContext(t.Context(), plugin, "--kubeconfig", j.tokenKubeconfig(t, "e2e-nosupport"), "usage",
		"-n", watchNS, "daily-quota", j.quotaUser).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "403") {
		t.Errorf("a ServiceAccount without the binding: %v: %s; want refused 403", err, out)
	}
	// The raw API as kubectl get --raw reads it: a caller with nothing used (a denied peek is
	// a 429, which --raw reports as an error).
	raw := kc(t, c, "get", "--raw", "/apis/usage.ratelimit.dev/v1alpha1/namespaces/"+watchNS+
		"/ratelimitpolicies/daily-quota/usage?identity=raw-"+j.run)
	if !strings.Contains(raw, `"allowed":true`) || !strings.Contains(raw, `"remaining":2`) {
		t.Errorf("kubectl get --raw: %s", raw)
	}
	j.grant(t, plugin, users["token e2e-support"])
}

// twoOfTwoUsed checks a usage answer: denied, its one limit 2 of 2 used.
func twoOfTwoUsed(out []byte) error {
	var got struct {
		Allowed bool `json:"allowed"`
		Limits  []struct {
			Name      string `json:"name"`
			Used      int64  `json:"used"`
			Remaining int64  `json:"remaining"`
		} `json:"limits"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("not the usage API's JSON: %s: %w", out, err)
	}
	if got.Allowed || len(got.Limits) != 1 || got.Limits[0].Used != 2 || got.Limits[0].Remaining != 0 {
		return fmt.Errorf("want 2 of 2 used and denied: %s", out)
	}
	return nil
}

// grant has support staff unblock the quota's caller: refused while bound to usage-reader
// only (403, no update), then bound also to the chart's usage-editor ClusterRole, `kubectl
// ratelimit grant` of 1; the example app's sidecar admits the caller once more within its
// deny cache's hold, then refuses again, and the grant is an Event on the policy naming the
// ServiceAccount.
func (j *journey) grant(t *testing.T, plugin, kcfg string) {
	c := j.c
	grant := func() (string, error) {
		out, err := exec.CommandContext(t.Context(), plugin, "--kubeconfig", kcfg, "grant", "-n", watchNS, "daily-quota",
			j.quotaUser, "1", "--request-id", "e2e-grant-"+j.run, "-o", "json").CombinedOutput()
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
