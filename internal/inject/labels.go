package inject

import (
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// notLabelChar matches what a label value may not hold.
var notLabelChar = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// LabelValue turns a version string into a label value: characters a label may not hold
// become "_", it is cut to 63 characters and trimmed to begin and end alphanumeric
// (v1.2.3+abc becomes v1.2.3_abc); "unknown" when nothing is left.
func LabelValue(version string) string {
	v := notLabelChar.ReplaceAllString(version, "_")
	if len(v) > validation.LabelValueMaxLength {
		v = v[:validation.LabelValueMaxLength]
	}
	v = strings.TrimFunc(v, func(r rune) bool { return r == '_' || r == '-' || r == '.' })
	if v == "" {
		return "unknown"
	}
	return v
}

// record sets the labels and annotation that make injected Pods and their sidecar's version
// visible to `kubectl get pods -l ratelimit.dev/injected=true -L ratelimit.dev/sidecar-version`.
func record(labels, annotations map[string]string, cfg Config) (map[string]string, map[string]string) {
	if labels == nil {
		labels = map[string]string{}
	}
	if annotations == nil {
		annotations = map[string]string{}
	}
	labels[LabelInjected] = "true"
	labels[LabelSidecarVersion] = LabelValue(cfg.Version)
	annotations[AnnotationSidecarImage] = cfg.Image
	return labels, annotations
}
