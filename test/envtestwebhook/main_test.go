// Package envtestwebhook runs the RateLimitPolicy admission webhooks in-process behind a real
// kube-apiserver (envtest), which calls them over TLS exactly as a cluster would: the
// webhook configurations come from config/webhook/manifests.yaml, rewritten by envtest to
// point at the local webhook server.
package envtestwebhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	webhookv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/internal/webhook/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/kubetest"
)

var (
	env      *kubetest.Env
	startErr error // the control plane could not start: a missing part (skip, or fail under CI)
	mgrErr   error // the control plane started but the webhook manager did not: always a failure
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	env, startErr = kubetest.Start(func(e *envtest.Environment) {
		e.WebhookInstallOptions = envtest.WebhookInstallOptions{
			// The directory also holds kustomization.yaml and service.yaml; envtest only
			// installs the Mutating/ValidatingWebhookConfigurations it finds.
			Paths: []string{filepath.Join(kubetest.RepoRoot(), "config", "webhook")},
		}
	})
	if startErr != nil {
		fmt.Fprintf(os.Stderr, "envtestwebhook: %v\n", startErr)
	}
	stop := func() {}
	if startErr == nil {
		if stop, mgrErr = startManager(env); mgrErr != nil {
			fmt.Fprintf(os.Stderr, "envtestwebhook: %v\n", mgrErr)
		}
	}
	code := m.Run()
	stop()
	if err := env.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "envtestwebhook: %v\n", err)
	}
	os.Exit(code)
}

// kube returns the shared control plane with the webhooks serving, failing (CI) or skipping
// the test without a control plane, and failing it when the webhook manager did not start.
func kube(t *testing.T) *kubetest.Env {
	t.Helper()
	e := kubetest.Require(t, env, startErr)
	if mgrErr != nil {
		t.Fatalf("webhook manager: %v", mgrErr)
	}
	return e
}

// startManager runs a controller-runtime manager with only the RateLimitPolicy webhooks, on
// the host, port and certificates envtest installed the webhook configurations for, and
// returns once the webhook server answers TLS with that certificate. stop cancels the
// manager and waits for it to return.
func startManager(e *kubetest.Env) (stop func(), err error) {
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
				fmt.Fprintf(os.Stderr, "envtestwebhook: manager: %v\n", err)
			}
		case <-time.After(30 * time.Second):
			fmt.Fprintln(os.Stderr, "envtestwebhook: manager did not stop within 30s")
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
	var last error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-exited:
			return fmt.Errorf("manager exited before the webhook server came up: %w", err)
		default:
		}
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, cfg)
		if err == nil {
			return conn.Close()
		}
		last = err
	}
	return fmt.Errorf("webhook server %s did not answer TLS within %s: %w", addr, timeout, last)
}
