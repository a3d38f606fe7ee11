package verdict

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// deniedMessage is the message of every denial a front logs.
const deniedMessage = "rate limit denied"

// logDenials logs, at V(1), every denial among outs and every denial a shadow policy let
// through, for front: the same key/value pairs whatever the front. The identity is never
// logged: it is often a credential such as an API key.
func logDenials(log logr.Logger, front string, outs []engine.Outcome) {
	log = log.V(1)
	if !log.Enabled() {
		return
	}
	for i := range outs {
		o := &outs[i]
		if o.Allowed && !o.Shadowed || o.Peeked {
			continue // a peek denies nothing
		}
		d := &o.Decision
		log.Info(deniedMessage, "front", front, "policy", o.Rule.Name(), "result", o.Result(), "limit", d.DeniedBy,
			"source", string(d.Source), "retryAfter", d.RetryAfter.Round(time.Millisecond))
	}
}
