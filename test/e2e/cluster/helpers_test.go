package cluster_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/cluster"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// kc runs kubectl and fails the test on an error.
func kc(t *testing.T, c *cluster.Cluster, args ...string) string {
	t.Helper()
	out, err := c.Kubectl(wait.Context(t, 5*time.Minute), nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// apply is `kubectl apply -f -` of the YAML in namespace ns ("" for the YAML's own).
func apply(t *testing.T, c *cluster.Cluster, ns, yaml string) {
	t.Helper()
	args := []string{"apply", "-f", "-"}
	if ns != "" {
		args = append(args, "-n", ns)
	}
	if _, err := c.Kubectl(wait.Context(t, 2*time.Minute), []byte(yaml), args...); err != nil {
		t.Fatal(err)
	}
}

// namespace creates ns enforcing the restricted Pod Security Standard, as the README tells
// users to label theirs.
func namespace(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	apply(t, c, "", fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels:
    pod-security.kubernetes.io/enforce: restricted
    pod-security.kubernetes.io/enforce-version: latest
    pod-security.kubernetes.io/warn: restricted
`, ns))
}

// dump logs what a failed step leaves to look at: the namespace's pods and events, and the
// local cluster's kubelet log.
func dump(t *testing.T, c *cluster.Cluster, namespaces ...string) {
	t.Helper()
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, ns := range namespaces {
		out, _ := c.Kubectl(ctx, nil, "-n", ns, "get", "pods,rlp,deploy,svc,endpointslices", "-o", "wide")
		t.Logf("namespace %s:\n%s", ns, out)
		out, _ = c.Kubectl(ctx, nil, "-n", ns, "get", "events", "--sort-by", ".lastTimestamp")
		t.Logf("events in %s:\n%s", ns, tail(out, 40))
		out, _ = c.Kubectl(ctx, nil, "-n", ns, "logs", "--all-containers", "--prefix", "--tail", "30", "-l", "app.kubernetes.io/name")
		t.Logf("logs in %s:\n%s", ns, out)
	}
	if c.Local {
		t.Logf("kubelet:\n%s", c.Logs("kubelet", 30))
	}
}

func tail(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// svcClient reaches Services the way a client in the cluster does. On this machine's
// cluster, directly at the ClusterIP (kube-proxy's rules route it from the node); on any
// other, through the API server's service proxy.
type svcClient struct {
	c      *cluster.Cluster
	direct *http.Client
	proxy  *http.Client
	host   string

	mu  sync.Mutex
	ips map[string]string // ns/name → ClusterIP
}

func newSvcClient(t *testing.T, c *cluster.Cluster) *svcClient {
	t.Helper()
	s := &svcClient{c: c, ips: map[string]string{}}
	if c.Local {
		s.direct = &http.Client{
			Timeout: 10 * time.Second,
			Transport: &http.Transport{
				DialContext:       (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
				DisableKeepAlives: true,
				TLSClientConfig:   &tls.Config{MinVersion: tls.VersionTLS12},
			},
		}
		return s
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.proxy = &http.Client{Transport: rt, Timeout: 10 * time.Second}
	s.host = cfg.Host
	return s
}

// reply is what a request got.
type reply struct {
	status int
	header http.Header
	body   string
}

// get sends GET path to port 80 of Service svc in ns with the headers given ("Host" sets
// the request's host).
func (s *svcClient) get(ctx context.Context, ns, svc, path string, headers map[string]string) (reply, error) {
	const port = 80
	var url string
	client := s.direct
	if client != nil {
		base, err := s.url(ctx, ns, svc, port)
		if err != nil {
			return reply{}, err
		}
		url = base + path
	} else {
		client = s.proxy
		url = fmt.Sprintf("%s/api/v1/namespaces/%s/services/%s:%d/proxy%s", s.host, ns, svc, port, path)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return reply{}, err
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return reply{status: resp.StatusCode, header: resp.Header, body: string(body)}, nil
}

// url is http://<the Service's ClusterIP>:port, the ClusterIP asked for once.
func (s *svcClient) url(ctx context.Context, ns, svc string, port int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ip, ok := s.ips[ns+"/"+svc]
	if !ok {
		out, err := s.c.Kubectl(ctx, nil, "-n", ns, "get", "svc", svc, "-o", "jsonpath={.spec.clusterIP}")
		if err != nil {
			return "", err
		}
		ip = strings.TrimSpace(out)
		s.ips[ns+"/"+svc] = ip
	}
	return fmt.Sprintf("http://%s:%d", ip, port), nil
}

// helloApp is a Deployment of agnhost serve-hostname (every path answers with the pod's
// name) of the restricted standard, and its Service on port 80.
func helloApp(name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  labels: {app.kubernetes.io/name: %[1]s}
spec:
  replicas: 1
  selector:
    matchLabels: {app.kubernetes.io/name: %[1]s}
  template:
    metadata:
      labels: {app.kubernetes.io/name: %[1]s}
    spec:
      automountServiceAccountToken: false
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        seccompProfile: {type: RuntimeDefault}
      containers:
      - name: %[1]s
        image: %[2]s
        imagePullPolicy: IfNotPresent
        args: [serve-hostname, --port=9376]
        ports: [{name: http, containerPort: 9376}]
        readinessProbe:
          httpGet: {path: /, port: 9376}
          periodSeconds: 1
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {drop: [ALL]}
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
spec:
  selector: {app.kubernetes.io/name: %[1]s}
  ports: [{name: http, port: 80, targetPort: http}]
`, name, image)
}
