// Package ratelimitheaders writes the RateLimit response headers every front sends
// (draft-ietf-httpapi-ratelimit-headers, as structured fields, and RFC 9110's Retry-After)
// from the engine's outcomes. The HTTP fronts set them on their answers; the Envoy RLS front
// hands them to Envoy as response_headers_to_add.
package ratelimitheaders

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// Header names of draft-ietf-httpapi-ratelimit-headers (structured fields) and RFC 9110.
const (
	// HeaderPolicy lists the quota policies: `"name";q=<quota>;w=<window seconds>`.
	HeaderPolicy = "RateLimit-Policy"
	// HeaderLimit reports what is left: `"name";r=<remaining>;t=<seconds until reset>`.
	HeaderLimit = "RateLimit"
	// HeaderRetryAfter is the whole seconds a denied caller should wait.
	HeaderRetryAfter = "Retry-After"
)

// Field is one response header.
type Field struct {
	// Name is the header name.
	Name string
	// Value is the header value.
	Value string
}

// For are the headers describing outcomes: RateLimit-Policy with every limit of every
// policy Redis answered for, RateLimit with each one's reported limit (the tightest, or the
// denying one), and Retry-After when the request is denied and may be retried. Quota
// policies are named "<policy>/<limit>"; a calendar limit's window is the one holding the
// outcome's At (the Redis server's present; 82800 seconds on a 23-hour day).
func For(outs []engine.Outcome) []Field {
	return forAt(outs, time.Now())
}

// forAt is For with the present at now for outcomes without At.
func forAt(outs []engine.Outcome, now time.Time) []Field {
	var policies, limits []string
	for i := range outs {
		o := &outs[i]
		d := &o.Decision
		if d.LimitName == "" {
			continue
		}
		at := now
		if !o.At.IsZero() {
			at = o.At
		}
		for _, l := range o.Limits() {
			q := l.Burst
			if q == 0 {
				q = l.Requests
			}
			policies = append(policies, item(o.Rule.Name(), l.Name)+";q="+itoa(q)+";w="+itoa(Seconds(l.Window(at))))
		}
		t := d.ResetAfter
		if !d.Allowed && d.RetryAfter > 0 {
			t = d.RetryAfter
		}
		limits = append(limits, item(o.Rule.Name(), d.LimitName)+";r="+itoa(max(d.Remaining, 0))+";t="+itoa(Seconds(t)))
	}
	var out []Field
	if len(policies) > 0 {
		out = append(out, Field{HeaderPolicy, strings.Join(policies, ", ")}, Field{HeaderLimit, strings.Join(limits, ", ")})
	}
	if ra, ok := RetryAfter(outs); ok {
		out = append(out, Field{HeaderRetryAfter, itoa(Seconds(ra))})
	}
	return out
}

// RetryAfter is how long a denied request should wait, when it is denied and a retry can
// ever succeed.
func RetryAfter(outs []engine.Outcome) (time.Duration, bool) {
	d := engine.Denial(outs)
	if d == nil || d.Rejected || d.Decision.RetryAfter < 0 {
		return 0, false
	}
	return max(d.Decision.RetryAfter, time.Second), true
}

// Set sets fields on h, replacing any values of the same names.
func Set(h http.Header, fields []Field) {
	for _, f := range fields {
		h.Set(f.Name, f.Value)
	}
}

// Seconds is d in whole seconds, rounded up, as these headers state every duration; 0 when
// d is not positive.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// item is a structured-field string (RFC 8941 sf-string) naming one limit of a policy.
// Compiled from a RateLimitPolicy, policy and limit names are DNS names and need no escaping;
// but a snapshot is read from a ConfigMap that the namespace's editors may write, where a
// name can hold anything: a quote and a comma there would add an item naming another policy
// or quota to the header. So '"' and '\' are escaped, and bytes an sf-string cannot hold
// (controls, non-ASCII) become '?'.
func item(policy, limit string) string {
	name := policy + "/" + limit
	if strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r > 0x7e || r == '"' || r == '\\' }) < 0 {
		return `"` + name + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := range len(name) {
		switch c := name[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c > 0x7e:
			b.WriteByte('?')
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// Reason is a short sentence saying why d denied its request, for the body of a denial.
// It never names the caller's identity.
func Reason(d *engine.Outcome) string {
	name := d.Rule.Name()
	switch {
	case d.Rejected:
		return fmt.Sprintf("rate limited: policy %s requires an identity and the request has none", name)
	case d.Decision.WithoutRedis():
		return fmt.Sprintf("rate limited by policy %s: Redis is unavailable and its failure mode is %s", name, d.Rule.Entry.FailureMode)
	case d.Decision.RetryAfter < 0:
		return fmt.Sprintf("rate limited by policy %s (limit %s): the request costs more than the limit holds", name, d.Decision.LimitName)
	}
	return fmt.Sprintf("rate limited by policy %s (limit %s); retry after %ds", name, d.Decision.LimitName, Seconds(d.Decision.RetryAfter))
}
