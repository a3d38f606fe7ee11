package tracing_test

import (
	"context"
	"errors"
	"testing"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

// TestDecide pins the on/off rule docs/tracing.md states.
func TestDecide(t *testing.T) {
	const ep = "http://collector:4318"
	for _, c := range []struct {
		name string
		env  map[string]string
		on   bool
		err  bool
	}{
		{"nothing set", nil, false, false},
		{"only the service name", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"}, false, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true, false},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, true, false},
		{"blank endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, false, false},
		{"exporter otlp alone", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true, false},
		{"exporter none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}, false, false},
		{"sdk disabled wins", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false, false},
		{"sdk disabled false", map[string]string{"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true, false},
		{"zipkin", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false, true},
		{"grpc protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, true},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, false},
		{"protocol when off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			on, err := tracing.Decide(env(c.env))
			if on != c.on || (err != nil) != c.err {
				t.Fatalf("Decide = %v, %v; want on %v, error %v", on, err, c.on, c.err)
			}
			if err != nil && !errors.Is(err, tracing.ErrUnsupported) {
				t.Errorf("error %v is not ErrUnsupported", err)
			}
		})
	}
}

// TestSetupOff: without the variables Setup leaves tracing off and its shutdown does nothing.
func TestSetupOff(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(k, "")
	}
	shutdown, err := tracing.Setup(context.Background(), logr.Discard())
	if err != nil || tracing.Enabled() {
		t.Fatalf("Setup: %v, enabled %v", err, tracing.Enabled())
	}
	if err := shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestSetupOn: an endpoint turns tracing on until shutdown turns it off again.
func TestSetupOn(t *testing.T) {
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_TRACES_EXPORTER", "")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	shutdown, err := tracing.Setup(context.Background(), logr.Discard())
	if err != nil || !tracing.Enabled() {
		t.Fatalf("Setup: %v, enabled %v", err, tracing.Enabled())
	}
	if err := shutdown(context.Background()); err != nil { // nothing recorded: nothing to send
		t.Fatal(err)
	}
	if tracing.Enabled() {
		t.Fatal("still on after shutdown")
	}
}
