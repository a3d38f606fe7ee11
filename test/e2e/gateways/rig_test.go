package gateways_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	namespace = "shop"
	// host is the site the policies match; other hosts are never limited.
	host = "shop.example"
	// servedHosts are the hosts the proxies serve (SERVED_HOSTS, SERVER_NAMES): host and
	// another site no policy names. Every other host is answered 421.
	servedHosts = host + " other.example"
	// startWait bounds the wait for a process to answer.
	startWait = 30 * time.Second
)

// policies are the two routes' policies: GET under /api (3 a minute, FailOpen) and POST
// under /api (2 a minute, FailClosed), on host only, per X-API-Key. reads sets the GET limit.
func policies(reads int64) []*v1alpha1.RateLimitPolicy {
	route := func(m v1alpha1.HTTPMethod) policytest.Option {
		return func(p *v1alpha1.RateLimitPolicy) {
			p.Spec.Match.HTTP = []v1alpha1.HTTPMatch{{Hosts: []string{host}, PathPrefixes: []string{"/api"}, Methods: []v1alpha1.HTTPMethod{m}}}
		}
	}
	return []*v1alpha1.RateLimitPolicy{
		policytest.New(namespace, "reads", route(http.MethodGet), policytest.Limit("per-minute", reads, time.Minute),
			policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.FailureMode(v1alpha1.FailureModeFailOpen)),
		policytest.New(namespace, "writes", route(http.MethodPost), policytest.Limit("per-minute", 2, time.Minute),
			policytest.OnMissing(v1alpha1.MissingIdentityShared), policytest.FailureMode(v1alpha1.FailureModeFailClosed)),
	}
}

// rig is a real redis-server, the real sidecar binary (built by proc.MustBuild) serving forward auth on loopback, and
// an upstream that counts what it receives.
type rig struct {
	redis    *redistest.Server
	snapshot string // the snapshot file the sidecar watches
	fwdAuth  string // the sidecar's forward-auth address
	upstream string // the upstream's address
	hits     atomic.Int64
	seen     atomic.Pointer[http.Header] // the last request's header at the upstream
	seenHost atomic.Pointer[string]      // and its Host
	// stopSidecar stops the sidecar by its PID.
	stopSidecar func()
}

func startRig(t *testing.T, sidecar string) *rig {
	t.Helper()
	r := &rig{redis: redistest.StartServer(t)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.hits.Add(1)
		h, host := req.Header.Clone(), req.Host
		r.seen.Store(&h)
		r.seenHost.Store(&host)
		w.Header().Set("RateLimit", "the app's own, must be replaced")
		_, _ = io.WriteString(w, "upstream "+req.Method+" "+req.URL.Path)
	}))
	t.Cleanup(up.Close)
	r.upstream = up.Listener.Addr().String()
	r.snapshot = filepath.Join(t.TempDir(), "snapshot.json")
	r.publish(t, policies(3)...)
	r.startSidecar(t, sidecar)
	return r
}

// startSidecar runs the sidecar's forward-auth front on free loopback ports (its address in
// r.fwdAuth) and waits until it is ready.
func (r *rig) startSidecar(t *testing.T, sidecar string) {
	t.Helper()
	addrs, halt := startOnFreePorts(t, "sidecar", 2, func(addrs []string) *exec.Cmd {
		return exec.Command(sidecar, "--namespace", namespace, "--snapshot-file", r.snapshot,
			"--redis-addrs", r.redis.Addr(), "--forward-auth-bind-address", addrs[0],
			"--http-bind-address", "", "--grpc-bind-address", "", "--metrics-bind-address", addrs[1],
			"--drain-delay", "0s", "--shutdown-grace", "2s", "--redis-timeout", "1s")
	}, func(addrs []string) error {
		return wait.Answers(http.DefaultClient, "http://"+addrs[1]+"/readyz", http.StatusOK)
	})
	r.fwdAuth, r.stopSidecar = addrs[0], halt
}

// publish replaces the snapshot file atomically, as a policy edit does.
func (r *rig) publish(t *testing.T, ps ...*v1alpha1.RateLimitPolicy) {
	t.Helper()
	tmp := r.snapshot + ".tmp"
	if err := os.WriteFile(tmp, snapshottest.Document(t, namespace, r.redis.Addr(), ps...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, r.snapshot); err != nil {
		t.Fatal(err)
	}
}

// repoFile is the text of a file of this repository, as shipped.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(kube.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// answer is one response as the client got it.
type answer struct {
	status int
	header http.Header
	body   string
}

// do sends method path with Host host and X-API-Key key through proxy, and extra header
// pairs.
func do(t *testing.T, proxy, method, reqHost, path, key string, extra ...string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(wait.Context(t, 10*time.Second), method, "http://"+proxy+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = reqHost
	req.Header.Set("X-API-Key", key)
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Add(extra[i], extra[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", method, reqHost, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

func (a answer) String() string { return fmt.Sprintf("%d %v %q", a.status, a.header, a.body) }
