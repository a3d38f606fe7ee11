package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	webhookv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/internal/webhook/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// StartWebhooks is Start with the RateLimitPolicy admission webhooks served in-process: the
// API server calls them over TLS exactly as a cluster would. It returns once the webhook
// server answers; Stop stops it first. When the control plane starts but the webhook manager
// does not, it returns both the Env and the error, which Require counts as a failure.
func StartWebhooks() (*Env, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	e, err := Start(WithWebhookConfigs)
	if err != nil {
		return nil, err
	}
	stop, err := serveWebhooks(e)
	if err != nil {
		return e, fmt.Errorf("webhook manager: %w", err)
	}
	e.stops = append(e.stops, stop)
	return e, nil
}

// serveWebhooks runs a controller-runtime manager with only the RateLimitPolicy webhooks, on
// the host, port and certificates envtest installed the webhook configurations for, and
// returns once the webhook server answers TLS with that certificate. stop cancels the
// manager and waits for it to return.
func serveWebhooks(e *Env) (stop func(), err error) {
	o := &e.Environment.WebhookInstallOptions
	mgr, err := ctrl.NewManager(rest.CopyConfig(e.Config), ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    o.LocalServingHost,
			Port:    o.LocalServingPort,
			CertDir: o.LocalServingCertDir,
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if err := webhookv1alpha1.SetupRateLimitPolicyWebhookWithManager(mgr, policy.Rules{}); err != nil {
		return nil, fmt.Errorf("set up webhooks: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stop = func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				fmt.Fprintf(os.Stderr, "webhook manager: %v\n", err)
			}
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "webhook manager did not stop within 30s")
		}
	}
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	if err := waitTLS(addr, o.LocalServingCAData, done, time.Minute); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// waitTLS polls addr until it completes a TLS handshake with a certificate signed by caPEM.
func waitTLS(addr string, caPEM []byte, exited <-chan error, timeout time.Duration) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("envtest gave no webhook CA")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	dialer := &net.Dialer{Timeout: time.Second}
	err := wait.Poll(timeout, 100*time.Millisecond, func() error {
		select {
		case err := <-exited:
			return wait.Abort(fmt.Errorf("manager exited before the webhook server came up: %w", err))
		default:
		}
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		return conn.Close()
	})
	if err != nil {
		return fmt.Errorf("webhook server %s did not answer TLS: %w", addr, err)
	}
	return nil
}

// WarningLog collects the API server's warnings (HTTP Warning headers, code 299).
type WarningLog struct {
	mu   sync.Mutex
	msgs []string
}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (w *WarningLog) HandleWarningHeaderWithContext(_ context.Context, code int, _, text string) {
	if code != 299 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Take returns the warnings seen since the last Take.
func (w *WarningLog) Take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

// NewWarningClient returns a client whose warnings land in the returned log.
func NewWarningClient(t testing.TB, e *Env) (client.Client, *WarningLog) {
	t.Helper()
	w := &WarningLog{}
	cfg := rest.CopyConfig(e.Config)
	cfg.WarningHandler = nil
	cfg.WarningHandlerWithContext = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c, w
}

// AssertWarning checks that one of the warnings contains every fragment.
func AssertWarning(t testing.TB, got []string, frags ...string) {
	t.Helper()
	for _, w := range got {
		if ContainsAll(w, frags) {
			return
		}
	}
	t.Errorf("no warning containing %q; got %q", frags, got)
}

// ContainsAll reports whether s contains every fragment.
func ContainsAll(s string, frags []string) bool {
	for _, f := range frags {
		if !strings.Contains(s, f) {
			return false
		}
	}
	return true
}
