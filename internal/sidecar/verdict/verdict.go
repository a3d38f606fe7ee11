// Package verdict is the one answer every front gives a request: admitted, denied, bad
// request, or unavailable (no snapshot yet), with the HTTP status, the RateLimit header
// fields and the message that go with it. A Front asks the engine and records each verdict
// the same way whatever the front: its result on the front's span (tracing.EndFront) and
// every denial in the front's log. A front only translates the verdict to its wire format,
// as envoyproxy/ratelimit's HTTP handler is a thin adapter over its one service.
package verdict

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/ratelimitheaders"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/requestread"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/tracing"
)

// Kind is what a verdict says of its request.
type Kind int

const (
	// Admitted is a request no policy denied (or none governs).
	Admitted Kind = iota
	// Denied is a request a policy denied.
	Denied
	// BadRequest is a request that cannot be judged as sent; nothing was debited.
	BadRequest
	// Unavailable is a request that cannot be judged yet, as no snapshot is loaded.
	Unavailable
)

// String names the kind, as logs and test failures show it.
func (k Kind) String() string {
	switch k {
	case Admitted:
		return "admitted"
	case Denied:
		return "denied"
	case BadRequest:
		return "bad request"
	case Unavailable:
		return "unavailable"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Verdict is the answer to one front request.
type Verdict struct {
	// Kind says whether the request is admitted, denied, bad or cannot be judged yet.
	Kind Kind
	// Status is the HTTP status that answers it: 200 admitted, the front's denial status,
	// 503 unavailable, and 400 (or the status the front refused it with) for a bad request.
	Status int
	// Fields are the RateLimit header fields of the policies decided (admitted or denied).
	Fields []ratelimitheaders.Field
	// Message says why the request was denied or refused, in one line that names no
	// identity; empty when admitted.
	Message string
	// Outcomes are the policies decided, in the order they were decided.
	Outcomes []engine.Outcome
}

// Front judges the requests of one front and records every verdict: the result on the
// front's span, and each denial (a shadow policy's included) in Log at V(1).
type Front struct {
	// Name names the front in metrics, spans and logs.
	Name string
	// Engine decides.
	Engine *engine.Engine
	// Log receives the denials. Identities are never logged.
	Log logr.Logger
	// DenyStatus is the HTTP status of a denial; 0 means 429 Too Many Requests.
	DenyStatus int
	// Settles says the front settles costs from the response (engine.Check.Settles): the
	// reverse proxy does; ext_authz and forward auth never see the response.
	Settles bool
}

// HTTP judges a whole HTTP request (engine.DecideHTTP), recording the verdict on span.
func (f *Front) HTTP(ctx context.Context, span trace.Span, r *requestread.HTTPRequest) Verdict {
	outs, err := f.Engine.DecideHTTP(ctx, f.Name, r, f.Settles)
	if err != nil {
		return f.Refuse(span, err)
	}
	return f.Decided(span, outs)
}

// One judges a request against one policy (engine.Decide), recording the verdict on span.
func (f *Front) One(ctx context.Context, span trace.Span, r *engine.Rule, c engine.Check) Verdict {
	return f.Decided(span, []engine.Outcome{f.Engine.Decide(ctx, f.Name, r, c)})
}

// Decided is the verdict of outcomes the engine decided for this front (none: admitted),
// recorded on span, its denials logged.
func (f *Front) Decided(span trace.Span, outs []engine.Outcome) Verdict {
	logDenials(f.Log, f.Name, outs)
	v := Verdict{Kind: Admitted, Status: http.StatusOK, Fields: ratelimitheaders.For(outs), Outcomes: outs}
	result := tracing.ResultAllowed
	if d := engine.Denial(outs); d != nil {
		v.Kind, v.Status, v.Message = Denied, f.denyStatus(), ratelimitheaders.Reason(d)
		result = tracing.ResultDenied
	}
	tracing.EndFront(span, result, len(outs))
	return v
}

// Refuse is the verdict on a request err kept from being judged, recorded on span:
// Unavailable (503) for engine.ErrNoSnapshot, else BadRequest (400). err's text is the
// message.
func (f *Front) Refuse(span trace.Span, err error) Verdict {
	if errors.Is(err, engine.ErrNoSnapshot) {
		return refused(span, Unavailable, http.StatusServiceUnavailable, err.Error())
	}
	return refused(span, BadRequest, http.StatusBadRequest, err.Error())
}

// Reject is the BadRequest verdict on a request the front itself refuses with a client
// error status (a wrong method, a body too large, an unknown policy) and msg, recorded on
// span.
func (f *Front) Reject(span trace.Span, status int, msg string) Verdict {
	return refused(span, BadRequest, status, msg)
}

// refused is the verdict on a request that was not judged: no policy decided.
func refused(span trace.Span, kind Kind, status int, msg string) Verdict {
	tracing.EndFront(span, tracing.ResultError, 0)
	return Verdict{Kind: kind, Status: status, Message: msg}
}

func (f *Front) denyStatus() int {
	if f.DenyStatus == 0 {
		return http.StatusTooManyRequests
	}
	return f.DenyStatus
}
