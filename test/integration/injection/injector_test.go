package injection

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/ratelimit-dev/ratelimit-operator/internal/inject"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	"github.com/ratelimit-dev/ratelimit-operator/internal/webhook/podinject"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// testVersion is the manager version the injector stamps on pods.
const testVersion = "v0.1.0+test"

// injector is a controller-runtime manager serving only the injection webhook, as cmd/manager
// registers it, on the loopback host, port and certificate envtest installed the webhook
// configuration for. It can be stopped and started again.
type injector struct {
	env  *kube.Env
	halt func()
}

// start runs the manager and returns once its webhook server answers TLS.
func (i *injector) start() error {
	o := &i.env.Environment.WebhookInstallOptions
	mgr, err := ctrl.NewManager(rest.CopyConfig(i.env.Config), ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: o.LocalServingHost, Port: o.LocalServingPort, CertDir: o.LocalServingCertDir}),
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := podinject.Setup(mgr, inject.DefaultConfig(injectedImage, testVersion)); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	i.halt = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}
	addr := net.JoinHostPort(o.LocalServingHost, strconv.Itoa(o.LocalServingPort))
	if err := waitTLS(addr, o.LocalServingCAData); err != nil {
		i.stop()
		return err
	}
	return nil
}

// stop stops the manager and waits for it to return.
func (i *injector) stop() {
	if i.halt != nil {
		i.halt()
		i.halt = nil
	}
}

// waitTLS waits until addr completes a TLS handshake with a certificate signed by caPEM.
func waitTLS(addr string, caPEM []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("envtest gave no webhook CA")
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	dialer := &net.Dialer{Timeout: time.Second}
	return wait.Poll(time.Minute, 100*time.Millisecond, func() error {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, cfg)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}
