package main

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

var (
	//go:embed demo-policy.yaml
	demoPolicy []byte
	//go:embed demo-override.yaml
	demoOverride []byte
	//go:embed bad-policy.yaml
	badPolicy []byte
	//go:embed cross-namespace-policy.yaml
	crossNamespacePolicy []byte
)

// kubectl runs kubectl against the demo's control plane with stdin.
func (d *demo) kubectl(ctx context.Context, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.opts.kubectl, append([]string{"--kubeconfig", d.kcfg}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return strings.TrimRight(string(out), "\n"), err
}

func (d *demo) sayBlock(text string) {
	for _, line := range strings.Split(text, "\n") {
		d.say("%s", line)
	}
}

// applySamples creates the namespace and applies config/samples plus the demo policy.
func (d *demo) applySamples(ctx context.Context) error {
	d.step("kubectl apply -k config/samples (+ the demo policy), then kubectl get rlp")
	ns := d.opts.namespace
	if out, err := d.kubectl(ctx, nil, "create", "namespace", ns); err != nil {
		return fmt.Errorf("kubectl create namespace: %w\n%s", err, out)
	}
	if out, err := d.kubectl(ctx, nil, "apply", "-n", ns, "-k", filepath.Join(controlplane.RepoRoot(), "config", "samples")); err != nil {
		return fmt.Errorf("kubectl apply -k config/samples: %w\n%s", err, out)
	}
	if out, err := d.kubectl(ctx, demoPolicy, "apply", "-n", ns, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply demo policy: %w\n%s", err, out)
	}
	start := time.Now()
	if out, err := d.kubectl(ctx, nil, "wait", "-n", ns, "--for=condition=Ready", "rlp", "--all", "--timeout=60s"); err != nil {
		return fmt.Errorf("policies not Ready: %w\n%s", err, out)
	}
	took := time.Since(start).Round(10 * time.Millisecond)
	out, err := d.kubectl(ctx, nil, "get", "rlp", "-n", ns)
	if err != nil {
		return fmt.Errorf("kubectl get rlp: %w\n%s", err, out)
	}
	d.sayBlock(out)
	n := strings.Count(out, "\n")
	d.done(fmt.Sprintf("%d policies applied with kubectl, all Ready in %s (ScriptsLoaded, Published)", n, took))
	return nil
}

// answer is one response as shown.
type answer struct {
	code                  int
	rateLimit, retryAfter string
	policy                string
	body                  string
}

// send makes one request through the sidecar's proxy.
func (d *demo) send(ctx context.Context, method, path string, header ...string) (answer, error) {
	return d.sendTo(ctx, d.addrs.proxy, method, path, header...)
}

// sendTo makes one request to the server at addr.
func (d *demo) sendTo(ctx context.Context, addr, method, path string, header ...string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, nil)
	if err != nil {
		return answer{}, fmt.Errorf("request: %w", err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512)) // for display only
	return answer{code: resp.StatusCode, rateLimit: resp.Header.Get("RateLimit"), retryAfter: resp.Header.Get("Retry-After"),
		policy: resp.Header.Get("RateLimit-Policy"), body: strings.TrimSpace(string(body))}, nil
}

func (a answer) String() string {
	s := fmt.Sprintf("%d", a.code)
	if a.rateLimit != "" {
		s += "  RateLimit: " + a.rateLimit
	}
	if a.retryAfter != "" {
		s += "  Retry-After: " + a.retryAfter
	}
	return s
}

// burst sends 7 requests as one caller: 5 admitted, then 429 with headers.
func (d *demo) burst(ctx context.Context) error {
	d.step("A burst of 7 requests as X-API-Key: alice (policy demo-api: 5 per 10s)")
	codes, err := d.sendBurst(ctx, d.addrs.proxy, "alice")
	if err != nil {
		return err
	}
	b, err := d.send(ctx, http.MethodGet, "/orders", "X-API-Key", "bob")
	if err != nil {
		return err
	}
	d.say("bob, a different caller: %s", b)
	if fmt.Sprint(codes) != "[200 200 200 200 200 429 429]" || b.code != 200 {
		return fmt.Errorf("burst answered %v (bob %d), want 5×200 then 429s", codes, b.code)
	}
	d.done("burst: 200 ×5 then 429 with Retry-After and RateLimit headers; another caller unaffected")
	return nil
}

// plans sends 12 requests as a free caller and 12 as a pro caller of the same policy: its
// pro tier (X-Plan: pro) admits 10, the default 5.
func (d *demo) plans(ctx context.Context) error {
	d.step("Plans: a free and a pro caller on one policy (demo-api tier pro: 10 per 10s when X-Plan: pro)")
	admitted := map[string]int{}
	for _, c := range []struct{ key, plan string }{{"free-fay", ""}, {"pro-pia", "pro"}} {
		header := []string{"X-API-Key", c.key}
		if c.plan != "" {
			header = append(header, "X-Plan", c.plan)
		}
		var last answer
		for range 12 {
			a, err := d.send(ctx, http.MethodGet, "/orders", header...)
			if err != nil {
				return err
			}
			if a.code == http.StatusOK {
				admitted[c.key]++
			}
			last = a
		}
		d.say("%-8s X-Plan=%-5q 12 sent, %2d admitted; last: %s  RateLimit-Policy: %s", c.key, c.plan, admitted[c.key], last, last.policy)
	}
	if admitted["free-fay"] != 5 || admitted["pro-pia"] != 10 {
		return fmt.Errorf("plans admitted %v, want free-fay 5 (default tier) and pro-pia 10 (pro)", admitted)
	}
	d.done("plans: one policy, the default tier admitted 5 and the pro tier 10 of 12")
	return nil
}

// override applies a RateLimitOverride raising caller vip-val to the pro tier, waits until
// the sidecar applies it (polling as vip-probe, a caller of the same override), and sends 12
// requests as vip-val without X-Plan: 10 admitted, as for pro-pia.
func (d *demo) override(ctx context.Context) error {
	d.step("Override: kubectl apply a RateLimitOverride giving caller vip-val the pro tier, then 12 requests as vip-val without X-Plan")
	start := time.Now()
	if out, err := d.kubectl(ctx, demoOverride, "apply", "-n", d.opts.namespace, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply override: %w\n%s", err, out)
	}
	if out, err := d.kubectl(ctx, nil, "wait", "-n", d.opts.namespace, "--for=condition=Ready", "rlo/vip-val", "--timeout=30s"); err != nil {
		return fmt.Errorf("override not Ready: %w\n%s", err, out)
	}
	out, err := d.kubectl(ctx, nil, "get", "rlo", "-n", d.opts.namespace)
	if err != nil {
		return fmt.Errorf("kubectl get rlo: %w\n%s", err, out)
	}
	d.sayBlock(out)
	for {
		a, err := d.send(ctx, http.MethodGet, "/orders", "X-API-Key", "vip-probe")
		if err != nil {
			return err
		}
		if strings.Contains(a.policy, "q=10") {
			break
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("the sidecar still gives vip-probe %q 30s after the override", a.policy)
		}
		time.Sleep(100 * time.Millisecond)
	}
	admitted, last := 0, answer{}
	for range 12 {
		a, err := d.send(ctx, http.MethodGet, "/orders", "X-API-Key", "vip-val")
		if err != nil {
			return err
		}
		if a.code == http.StatusOK {
			admitted++
		}
		last = a
	}
	d.say("vip-val  no X-Plan    12 sent, %2d admitted; last: %s  RateLimit-Policy: %s", admitted, last, last.policy)
	if admitted != 10 {
		return fmt.Errorf("the overridden caller vip-val had %d of 12 admitted, want 10 (the pro tier)", admitted)
	}
	d.done(fmt.Sprintf("override: vip-val raised to the pro tier by a RateLimitOverride, 10 of 12 admitted (applied in %s)", time.Since(start).Round(10*time.Millisecond)))
	return nil
}

// badPolicy shows the webhook refusing a policy whose keys could cross Cluster slots.
func (d *demo) badPolicy(ctx context.Context) error {
	d.step("A bad policy: keys without a {hash tag} (would cross Redis Cluster slots)")
	if err := d.refused(ctx, "bad policy", badPolicy, "spec.keyLayout.state"); err != nil {
		return err
	}
	d.done("bad policy refused by the admission webhook, naming spec.keyLayout.state")
	return nil
}

// crossNamespace shows the webhook refusing a policy whose keys are another namespace's.
func (d *demo) crossNamespace(ctx context.Context) error {
	d.step("A policy naming another namespace's keys ({rl:victim/payments:...})")
	if err := d.refused(ctx, "cross-namespace policy", crossNamespacePolicy, "spec.keyLayout.state", "{rl:${namespace}/"); err != nil {
		return err
	}
	d.done("cross-namespace policy refused: every key must begin with {rl:${namespace}/")
	return nil
}

// refused applies manifest and fails unless the webhook refuses it with every fragment of
// want in its answer.
func (d *demo) refused(ctx context.Context, what string, manifest []byte, want ...string) error {
	out, err := d.kubectl(ctx, manifest, "apply", "-n", d.opts.namespace, "-f", "-")
	d.sayBlock(out)
	if err == nil {
		return fmt.Errorf("%s was accepted; the webhook must refuse it", what)
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			return fmt.Errorf("%s refused without naming %q: %w", what, w, err)
		}
	}
	return nil
}

// editPolicy raises the limit with kubectl patch and waits for the sidecar to apply it.
func (d *demo) editPolicy(ctx context.Context) error {
	d.step("Edit: kubectl patch rlp demo-api to 8 per 10s; the sidecar picks it up")
	start := time.Now()
	out, err := d.kubectl(ctx, nil, "patch", "rlp", "demo-api", "-n", d.opts.namespace, "--type=merge",
		"-p", `{"spec":{"limits":[{"name":"per-10s","requests":8,"period":"10s"}]}}`)
	if err != nil {
		return fmt.Errorf("kubectl patch: %w\n%s", err, out)
	}
	d.say("%s", out)
	for {
		a, err := d.send(ctx, http.MethodGet, "/orders", "X-API-Key", "carol")
		if err != nil {
			return err
		}
		if strings.Contains(a.policy, "q=8") {
			took := time.Since(start).Round(10 * time.Millisecond)
			d.say("after %s: %s  RateLimit-Policy: %s", took, a, a.policy)
			d.done("policy edit enforced by the sidecar " + took.String() + " after kubectl patch")
			return nil
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("the sidecar still enforces %q 30s after the edit", a.policy)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// killRedis kills redis-server and shows each policy's failure mode deciding.
func (d *demo) killRedis(ctx context.Context) error {
	d.step("Redis killed (SIGKILL): each policy's failure mode decides")
	d.redis.kill()
	open, err := d.send(ctx, http.MethodGet, "/orders", "X-API-Key", "dave")
	if err != nil {
		return err
	}
	d.say("GET /orders (demo-api, FailOpen):                  %s", open)
	start := time.Now()
	closed, err := d.send(ctx, http.MethodPost, "/payments/charge", "X-API-Key", "erin", "X-Customer-ID", "c-42")
	if err != nil {
		return err
	}
	took := time.Since(start).Round(time.Millisecond)
	d.say("POST /payments/charge (payments-per-customer, FailClosed): %s  (%s)", closed, took)
	d.say("    body: %s", closed.body)
	if open.code != 200 || closed.code != 429 {
		return fmt.Errorf("with Redis down: FailOpen answered %d, FailClosed %d; want 200 and 429", open.code, closed.code)
	}
	d.done(fmt.Sprintf("Redis down: FailOpen admitted, FailClosed refused (answered in %s)", took))
	return nil
}

// sendBurst sends 7 GET /orders to addr as caller key, showing each answer and the last
// body, and returns the status codes.
func (d *demo) sendBurst(ctx context.Context, addr, key string) ([]int, error) {
	var codes []int
	for i := 1; i <= 7; i++ {
		a, err := d.sendTo(ctx, addr, http.MethodGet, "/orders", "X-API-Key", key)
		if err != nil {
			return nil, err
		}
		codes = append(codes, a.code)
		d.say("#%d  %s", i, a)
		if i == 7 {
			d.say("    body: %s", a.body)
		}
	}
	return codes, nil
}
