package inject

import (
	"strconv"
	"strings"
)

// Mode is the sidecar's front, chosen by AnnotationMode.
type Mode string

// The modes.
const (
	// ModeProxy puts a reverse proxy in front of the app's upstream port; the Service
	// targets the proxy port. The default when AnnotationUpstreamPort is set.
	ModeProxy Mode = "proxy"
	// ModeEnvoy serves Envoy RLS v3 and ext_authz v3 over gRPC on 127.0.0.1, for a mesh or
	// Envoy proxy in the same Pod.
	ModeEnvoy Mode = "envoy"
	// ModeCheck serves the JSON check API (POST /v1/check) on 127.0.0.1 for an app that
	// asks it. The default without AnnotationUpstreamPort.
	ModeCheck Mode = "check"
)

// modes lists the valid modes, for messages.
var modes = []string{string(ModeProxy), string(ModeEnvoy), string(ModeCheck)}

// parseMode reads AnnotationMode, defaulting from whether an upstream port is set; an
// upstream port outside proxy mode is refused rather than ignored.
func parseMode(annotations map[string]string) (Mode, error) {
	v, set := annotations[AnnotationMode]
	_, upstream := annotations[AnnotationUpstreamPort]
	if !set {
		if upstream {
			return ModeProxy, nil
		}
		return ModeCheck, nil
	}
	switch m := Mode(v); m {
	case ModeProxy:
		if !upstream {
			return "", annotationError(AnnotationUpstreamPort, "", "is required in %s mode: name or number the app's container port the proxy forwards to", ModeProxy)
		}
		return m, nil
	case ModeEnvoy, ModeCheck:
		if upstream {
			return "", annotationError(AnnotationUpstreamPort, annotations[AnnotationUpstreamPort], "is only used in %s mode, not %s", ModeProxy, m)
		}
		return m, nil
	}
	return "", annotationError(AnnotationMode, v, "is not one of %s", strings.Join(modes, ", "))
}

// parsePort reads a port-number annotation, def when absent.
func parsePort(annotations map[string]string, key string, def int32) (int32, error) {
	v, ok := annotations[key]
	if !ok {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return 0, annotationError(key, v, "is not a port number (1-65535)")
	}
	return int32(n), nil
}
