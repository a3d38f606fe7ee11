package sidecar

import (
	"net/http"
	"strconv"
	"strings"
	"time"
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

// HeaderField is one response header.
type HeaderField struct {
	// Name is the header name.
	Name string
	// Value is the header value.
	Value string
}

// RateLimitHeaders are the headers describing outcomes: RateLimit-Policy with every limit of
// every policy Redis answered for, RateLimit with each one's reported limit (the tightest, or
// the denying one), and Retry-After when the request is denied and may be retried. Quota
// policies are named "<policy>/<limit>".
func RateLimitHeaders(outs []Outcome) []HeaderField {
	var policies, limits []string
	for i := range outs {
		o := &outs[i]
		d := &o.Decision
		if d.LimitName == "" {
			continue
		}
		for _, l := range o.Entry.Spec.Limits {
			q := l.Burst
			if q == 0 {
				q = l.Requests
			}
			policies = append(policies, item(o.Entry.Name(), l.Name)+";q="+itoa(q)+";w="+itoa(ceilSeconds(time.Duration(l.PeriodMs)*time.Millisecond)))
		}
		t := d.ResetAfter
		if !d.Allowed && d.RetryAfter > 0 {
			t = d.RetryAfter
		}
		limits = append(limits, item(o.Entry.Name(), d.LimitName)+";r="+itoa(max(d.Remaining, 0))+";t="+itoa(ceilSeconds(t)))
	}
	var out []HeaderField
	if len(policies) > 0 {
		out = append(out, HeaderField{HeaderPolicy, strings.Join(policies, ", ")}, HeaderField{HeaderLimit, strings.Join(limits, ", ")})
	}
	if ra, ok := RetryAfter(outs); ok {
		out = append(out, HeaderField{HeaderRetryAfter, itoa(ceilSeconds(ra))})
	}
	return out
}

// RetryAfter is how long a denied request should wait, when it is denied and a retry can
// ever succeed.
func RetryAfter(outs []Outcome) (time.Duration, bool) {
	d := Denial(outs)
	if d == nil || d.Rejected || d.Decision.RetryAfter < 0 {
		return 0, false
	}
	return max(d.Decision.RetryAfter, time.Second), true
}

// Denial is the outcome that denied the request, or nil when it is allowed.
func Denial(outs []Outcome) *Outcome {
	for i := range outs {
		if !outs[i].Allowed {
			return &outs[i]
		}
	}
	return nil
}

// SetHeaders sets fields on h, replacing any values of the same names.
func SetHeaders(h http.Header, fields []HeaderField) {
	for _, f := range fields {
		h.Set(f.Name, f.Value)
	}
}

// item is a structured-field string naming one limit of a policy. Policy and limit names are
// DNS labels, so they need no escaping.
func item(policy, limit string) string { return `"` + policy + "/" + limit + `"` }

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
