package engine

import (
	"time"

	"github.com/go-logr/logr"
)

// LogDenials logs, at V(1), every denial among outs and every denial a shadow policy let
// through, for front; keysAndValues (where in the front's request it happened) follow the
// front's name. The identity is never logged: it is often a credential such as an API key.
func LogDenials(log logr.Logger, front string, outs []Outcome, keysAndValues ...any) {
	log = log.V(1)
	if !log.Enabled() {
		return
	}
	for i := range outs {
		o := &outs[i]
		if o.Allowed && !o.Shadowed {
			continue
		}
		d := &o.Decision
		kv := append([]any{"front", front}, keysAndValues...)
		kv = append(kv, "policy", o.Rule.Name(), "result", o.Result(), "limit", d.DeniedBy,
			"source", string(d.Source), "retryAfter", d.RetryAfter.Round(time.Millisecond))
		log.Info("rate limit denied", kv...)
	}
}
