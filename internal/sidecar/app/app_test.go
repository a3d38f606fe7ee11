package app_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/app"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestRunServesFrontsAndDrains: Run serves every Front with an address on it, skips one
// without, and on cancel stops them all and returns nil.
func TestRunServesFrontsAndDrains(t *testing.T) {
	file := filepath.Join(t.TempDir(), "snapshot.json")
	if err := os.WriteFile(file, sidecartest.Doc(t, sidecartest.Policy("orders", 5)), 0o600); err != nil {
		t.Fatal(err)
	}
	a := app.New(app.Config{Namespace: sidecartest.Namespace, SnapshotFile: file, MetricsAddr: sidecartest.ClosedAddr(t),
		HTTP: httpserver.DefaultLimits(), ShutdownGrace: time.Second, Log: logr.Discard(),
		Redis: redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{sidecartest.ClosedAddr(t)}}}) // no Redis to reach
	addr := sidecartest.ClosedAddr(t)
	hello := httpserver.New(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello")
	}), httpserver.DefaultLimits())
	never := httpserver.New(http.NotFoundHandler(), httpserver.DefaultLimits())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- a.Run(ctx, app.Front{Name: "hello", Addr: addr, Server: hello}, app.Front{Name: "disabled", Server: never})
	}()
	for deadline := time.Now().Add(5 * time.Second); get(addr) != "hello"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the front never answered hello")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after cancel, want nil", err)
	}
	if body := get(addr); body != "" {
		t.Errorf("the front still answers %q after Run returned", body)
	}
}

// get is the body of GET / on addr, or "" when nothing answers.
func get(addr string) string {
	resp, err := http.Get("http://" + addr + "/")
	if err != nil {
		return ""
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
