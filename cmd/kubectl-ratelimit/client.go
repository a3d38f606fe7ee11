package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	// serverEnv names the environment variable --server defaults to.
	serverEnv = "RATELIMIT_USAGE_SERVER"
	// requestTimeout bounds one call to the usage server, exec credential plugin included.
	requestTimeout = 30 * time.Second
	// maxBodyBytes bounds what is read of an answer.
	maxBodyBytes = 1 << 20
	// maxMessageBytes bounds how much of a non-JSON error body is shown.
	maxMessageBytes = 300
)

// connectionOptions are the flags every subcommand shares: the kubeconfig, and, to call the
// usage server directly, where it is, how to trust its certificate, and whose credentials to
// send it.
type connectionOptions struct {
	server     string
	caFile     string
	insecure   bool
	token      string
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// addFlags registers the shared flags on the root command, for every subcommand.
func (o *connectionOptions) addFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	f.StringVar(&o.server, "server", "",
		"`URL` of the operator's usage server, to call it directly (default $"+serverEnv+"; unset: through the Kubernetes API server)")
	f.StringVar(&o.caFile, "certificate-authority", "",
		"PEM CA bundle `FILE` that signs the usage server's certificate with --server (default: the system's roots), else the API server's (as kubectl's)")
	f.BoolVar(&o.insecure, "insecure-skip-tls-verify", false,
		"do not verify the server's certificate (loopback demos only)")
	f.StringVar(&o.token, "token", "",
		"bearer `TOKEN` to send instead of the kubeconfig user's credentials")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "`PATH` of the kubeconfig file (default $KUBECONFIG, else ~/.kube/config)")
	f.StringVar(&o.overrides.CurrentContext, "context", "", "the kubeconfig `CONTEXT` to use")
	f.StringVarP(&o.overrides.Context.Namespace, "namespace", "n", "",
		"the `NAMESPACE` (default: the kubeconfig context's namespace, else default)")
}

// kubeConfig loads the kubeconfig as kubectl does: --kubeconfig, else $KUBECONFIG, else
// ~/.kube/config (in a pod, the pod's service account), with --context and -n applied.
func (o *connectionOptions) kubeConfig() clientcmd.ClientConfig {
	return o.clientConfig(&o.overrides)
}

// clientConfig is kubeConfig with overrides in place of the flags'.
func (o *connectionOptions) clientConfig(overrides *clientcmd.ConfigOverrides) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// restConfig is how the plugin reaches the Kubernetes API server, as kubectl does: the
// kubeconfig with --context, and, unless --server names the usage server (whose they are
// then), --token, --certificate-authority and --insecure-skip-tls-verify.
func (o *connectionOptions) restConfig() (*rest.Config, error) {
	overrides := o.overrides
	if !o.direct() {
		overrides.AuthInfo.Token = o.token
		overrides.ClusterInfo.CertificateAuthority = o.caFile
		overrides.ClusterInfo.InsecureSkipTLSVerify = o.insecure
	}
	cfg, err := o.clientConfig(&overrides).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		return nil, fmt.Errorf("no kubeconfig to reach the Kubernetes API server with (pass --kubeconfig, "+
			"or --server to call the usage server directly): %w", err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg.UserAgent = userAgent
	return cfg, nil
}

// namespace is -n, else the kubeconfig context's namespace, else "default" (also when there
// is no kubeconfig at all, as with --token).
func (o *connectionOptions) namespace() (string, error) {
	ns, _, err := o.kubeConfig().Namespace()
	if clientcmd.IsEmptyConfig(err) {
		return "default", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	return ns, nil
}

// kubeClient is a client of the Kubernetes API as the kubeconfig's user, as kubectl is.
func (o *connectionOptions) kubeClient() (kubernetes.Interface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = requestTimeout
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return cs, nil
}

// usageClient calls the usage API as the caller.
type usageClient struct {
	// base is the URL the API's paths (namespaces/...) are below, without a trailing slash:
	// the usage server's /v1, or the API server's /apis/usage.ratelimit.dev/v1alpha1.
	base string
	http *http.Client
	// viaAPIServer says the Kubernetes API server answers first (and may refuse: its own
	// authorization, a missing APIService, an unreachable usage server).
	viaAPIServer bool
}

// directPrefix is the prefix of the usage server's own routes.
const directPrefix = "/v1"

// connect is the namespace to act in and a client of the usage server.
func (o *connectionOptions) connect() (string, *usageClient, error) {
	ns, err := o.namespace()
	if err != nil {
		return "", nil, err
	}
	client, err := o.newClient()
	return ns, client, err
}

// newClient is a client of the usage API: through the Kubernetes API server (apiServerClient)
// unless --server or $RATELIMIT_USAGE_SERVER names the usage server to call directly
// (directClient).
func (o *connectionOptions) newClient() (*usageClient, error) {
	if o.direct() {
		return o.directClient()
	}
	return o.apiServerClient()
}

// direct reports whether the usage server is called directly: --server or
// $RATELIMIT_USAGE_SERVER names it.
func (o *connectionOptions) direct() bool { return o.server != "" || os.Getenv(serverEnv) != "" }

// directClient is a client of the usage server named by --server or $RATELIMIT_USAGE_SERVER,
// trusted as --certificate-authority / --insecure-skip-tls-verify say, sending the caller's
// bearer token.
func (o *connectionOptions) directClient() (*usageClient, error) {
	base, err := o.serverURL()
	if err != nil {
		return nil, err
	}
	tr, err := o.tlsTransport()
	if err != nil {
		return nil, err
	}
	rt, err := o.authenticated(tr)
	if err != nil {
		return nil, err
	}
	return &usageClient{base: base + directPrefix, http: &http.Client{Transport: rt, Timeout: requestTimeout}}, nil
}

// serverURL is the usage server's base URL. Plain http is allowed to loopback only: the
// bearer token would otherwise cross the network in clear.
func (o *connectionOptions) serverURL() (string, error) {
	raw := o.server
	if raw == "" {
		raw = os.Getenv(serverEnv)
	}
	if raw == "" {
		return "", fmt.Errorf("no usage server: pass --server or set $%s", serverEnv)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--server: %w", err)
	}
	if u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("--server %q: want scheme://host[:port][/path]", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	case u.Scheme == "http":
		return "", fmt.Errorf("--server %q: plain http would send the bearer token in clear; use https", raw)
	default:
		return "", fmt.Errorf("--server %q: scheme %q, want https", raw, u.Scheme)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	addr, err := netip.ParseAddr(host)
	return err == nil && addr.IsLoopback()
}

// tlsTransport is the base transport to the usage server. Its TLS is the usage server's own,
// not the cluster's: --certificate-authority's roots (else the system's), and no client
// certificate, so the kubeconfig's never reaches it.
func (o *connectionOptions) tlsTransport() (*http.Transport, error) {
	if o.insecure && o.caFile != "" {
		return nil, errors.New("--certificate-authority and --insecure-skip-tls-verify are mutually exclusive")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.insecure {
		cfg.InsecureSkipVerify = true // only when --insecure-skip-tls-verify asks for it
	}
	if o.caFile != "" {
		pool, err := loadCAs(o.caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:       cfg,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}, nil
}

// loadCAs reads a PEM CA bundle.
func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(filepath.Clean(file))
	if err != nil {
		return nil, fmt.Errorf("--certificate-authority: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--certificate-authority %s: no PEM certificate in it", file)
	}
	return pool, nil
}

// statusError is an answer of the usage server with a status the command does not expect;
// the server explains it in {"error":"message"}, and says in Retry-After when to try again
// (429: too many requests).
type statusError struct {
	code    int
	message string
	// retryAfter is the answer's Retry-After (whole seconds), when it had one.
	retryAfter    time.Duration
	hasRetryAfter bool
}

// Error is "403 Forbidden: message", and "(retry after 1s)" when the server said so.
func (e *statusError) Error() string {
	msg := fmt.Sprintf("%d %s: %s", e.code, http.StatusText(e.code), e.message)
	if e.hasRetryAfter {
		msg += fmt.Sprintf(" (retry after %s)", e.retryAfter)
	}
	return msg
}

// maxRetryAfter bounds a Retry-After the plugin believes.
const maxRetryAfter = time.Minute

// retryAfterOf reads a Retry-After of whole seconds (at most maxRetryAfter), or reports
// false for none or another form.
func retryAfterOf(h http.Header) (time.Duration, bool) {
	v := h.Get("Retry-After")
	n, err := strconv.ParseInt(v, 10, 64)
	if v == "" || err != nil || n < 0 {
		return 0, false
	}
	return min(time.Duration(n)*time.Second, maxRetryAfter), true
}

// escapedPath joins segments into an absolute URL path, each segment path-escaped.
func escapedPath(segments ...string) string {
	var b strings.Builder
	for _, s := range segments {
		b.WriteString("/")
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

// get sends GET path?query to the usage server and returns the body of an answer whose
// status is one of answers. Any other status is a *statusError.
func (c *usageClient) get(ctx context.Context, path string, query url.Values, answers ...int) ([]byte, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	return c.do(req, answers...)
}

// post sends POST path to the usage server with payload as its JSON body and returns the
// body of a 200 answer. Any other status is a *statusError.
func (c *usageClient) post(ctx context.Context, path string, payload any) ([]byte, error) {
	data, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("encoding the request: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, http.StatusOK)
}

// do sends req, asking for JSON, and returns the body of an answer whose status is one of
// answers. Any other status is a *statusError carrying the server's message.
func (c *usageClient) do(req *http.Request, answers ...int) ([]byte, error) {
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if errors.Is(err, errNoBearerToken) {
		return nil, errNoBearerToken // before any connection: the URL adds nothing
	}
	if err != nil {
		return nil, fmt.Errorf("calling the %s: %w", c.peer(), err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the %s's answer: %w", c.peer(), err)
	}
	for _, code := range answers {
		if resp.StatusCode == code {
			return body, nil
		}
	}
	se := &statusError{code: resp.StatusCode, message: errorMessage(body)}
	if c.viaAPIServer {
		se.message = apiServerHint(resp.StatusCode, body, se.message)
	}
	se.retryAfter, se.hasRetryAfter = retryAfterOf(resp.Header)
	return nil, se
}

// peer names whom the client calls.
func (c *usageClient) peer() string {
	if c.viaAPIServer {
		return "Kubernetes API server"
	}
	return "usage server"
}

// errorMessage is the message of an error body: its "error" field (the usage server's), else
// its "message" (a Kubernetes API Status), else the body's text.
func errorMessage(body []byte) string {
	var e errorBody
	if err := json.Unmarshal(body, &e); err == nil {
		if e.Error != "" {
			return e.Error
		}
		if e.Message != "" {
			return e.Message
		}
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		return "(no message)"
	}
	if len(text) > maxMessageBytes {
		text = text[:maxMessageBytes] + "…"
	}
	return text
}
