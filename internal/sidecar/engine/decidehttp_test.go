package engine_test

import (
	"errors"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
)

// TestDecideHTTPBeforeSnapshot: before the first snapshot nothing is decided, and the
// fronts can tell that from a bad request.
func TestDecideHTTPBeforeSnapshot(t *testing.T) {
	e := &engine.Engine{Store: &engine.Store{Namespace: "shop"}}
	p, q, err := requestread.ParseTarget("GET", "/api/x")
	if err != nil {
		t.Fatal(err)
	}
	outs, err := e.DecideHTTP(t.Context(), "test", &requestread.HTTPRequest{Method: "GET", Host: "shop.example", Path: p, Query: q}, false)
	if !errors.Is(err, engine.ErrNoSnapshot) || outs != nil {
		t.Fatalf("DecideHTTP before a snapshot: %v, %v; want ErrNoSnapshot", outs, err)
	}
}
