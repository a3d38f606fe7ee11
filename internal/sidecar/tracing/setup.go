package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// DefaultServiceName is service.name when neither OTEL_SERVICE_NAME nor
// OTEL_RESOURCE_ATTRIBUTES names the service.
const DefaultServiceName = "ratelimit-sidecar"

// The environment variables that decide whether tracing is on (Decide). The others the SDK
// and the exporter read themselves: OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_EXPORTER_OTLP_(TRACES_)HEADERS, _TIMEOUT,
// _COMPRESSION, _CERTIFICATE, _CLIENT_CERTIFICATE, _CLIENT_KEY.
const (
	EnvSDKDisabled           = "OTEL_SDK_DISABLED"
	EnvTracesExporter        = "OTEL_TRACES_EXPORTER"
	EnvEndpoint              = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint        = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol              = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvTracesProtocol        = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	supportedProtocol        = "http/protobuf"
	shutdownTimeout          = 5 * time.Second
	exporterOTLP, exporterNo = "otlp", "none"
)

// ErrUnsupported is Decide's error for settings this sidecar cannot honour (an exporter other
// than otlp, a protocol other than http/protobuf): tracing stays off rather than send spans
// nowhere.
var ErrUnsupported = errors.New("unsupported tracing setting")

// Decide is the on/off rule, from the environment getenv reads:
//
//   - OTEL_SDK_DISABLED=true: off.
//   - OTEL_TRACES_EXPORTER=none: off; =otlp: on (to the exporter's default endpoint,
//     https://localhost:4318, unless an endpoint variable names another); any other value is
//     ErrUnsupported (off).
//   - OTEL_TRACES_EXPORTER unset or empty: on exactly when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
//     or OTEL_EXPORTER_OTLP_ENDPOINT is set and not empty. (The specification's default
//     exporter is otlp; a sidecar exporting to localhost nobody asked for is not wanted, so
//     an endpoint or the exporter must be named.)
//   - When on, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL (else OTEL_EXPORTER_OTLP_PROTOCOL) must be
//     unset or http/protobuf; otherwise ErrUnsupported (off).
func Decide(getenv func(string) string) (bool, error) {
	if strings.EqualFold(strings.TrimSpace(getenv(EnvSDKDisabled)), "true") {
		return false, nil
	}
	on := false
	switch exp := strings.ToLower(strings.TrimSpace(getenv(EnvTracesExporter))); exp {
	case exporterNo:
		return false, nil
	case exporterOTLP:
		on = true
	case "":
		on = strings.TrimSpace(getenv(EnvTracesEndpoint)) != "" || strings.TrimSpace(getenv(EnvEndpoint)) != ""
	default:
		return false, fmt.Errorf("%w: %s=%q (only otlp or none)", ErrUnsupported, EnvTracesExporter, exp)
	}
	if !on {
		return false, nil
	}
	proto, name := strings.TrimSpace(getenv(EnvTracesProtocol)), EnvTracesProtocol
	if proto == "" {
		proto, name = strings.TrimSpace(getenv(EnvProtocol)), EnvProtocol
	}
	if proto != "" && proto != supportedProtocol {
		return false, fmt.Errorf("%w: %s=%q (only %s)", ErrUnsupported, name, proto, supportedProtocol)
	}
	return true, nil
}

// Setup turns tracing on when the process environment asks for it (Decide): the SDK with a
// batching OTLP/HTTP exporter configured by the OTEL_* variables, the resource from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (service.name defaults to
// DefaultServiceName), the sampler from OTEL_TRACES_SAMPLER (parentbased_always_on by
// default). The returned shutdown flushes the spans not yet exported and turns tracing off;
// it is a no-op when tracing stayed off. An error leaves tracing off: the caller logs it and
// serves on.
func Setup(ctx context.Context, log logr.Logger) (shutdown func(context.Context) error, err error) {
	noShutdown := func(context.Context) error { return nil }
	on, err := Decide(os.Getenv) // the SDK and the exporter read the same environment
	if err != nil || !on {
		return noShutdown, err
	}
	otel.SetLogger(log)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Error(err, "opentelemetry") }))
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noShutdown, fmt.Errorf("otlp/http trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", DefaultServiceName)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil {
		// a malformed OTEL_RESOURCE_ATTRIBUTES: keep what could be read
		log.Error(err, "tracing resource is partial")
		if res == nil {
			res = resource.Default()
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	restore := Use(tp)
	log.Info("tracing on", "exporter", "otlp", "protocol", supportedProtocol)
	return func(ctx context.Context) error {
		restore()
		ctx, cancel := context.WithTimeout(ctx, shutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("flush spans: %w", err)
		}
		return nil
	}, nil
}
