package sidecar

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
)

// ErrRepeatedHeader refuses a request that sends a header the limiter reads on several field
// lines: the limiter would read one value while the upstream may read the first, the last or
// all of them joined, and the two would disagree about who the caller is, what the request
// costs or whether it is a retry.
var ErrRepeatedHeader = errors.New("sent on several field lines, so the limiter and the upstream could read different values")

// HTTPCheck reads e's check of an HTTP request from its headers and its peer address:
// identity, cost and request id. Every header it reads goes through readHeader, so a
// header sent twice refuses the request (ErrRepeatedHeader) whatever it is used for.
func (e *Entry) HTTPCheck(h http.Header, peer string) (Check, error) {
	cost, err := e.HTTPCost(h)
	if err != nil {
		return Check{}, err
	}
	id, ok, err := e.HTTPIdentity(h, peer)
	if err != nil {
		return Check{}, err
	}
	rid, err := e.HTTPRequestID(h)
	if err != nil {
		return Check{}, err
	}
	return Check{Identity: id, HasIdentity: ok, Cost: cost, RequestID: rid}, nil
}

// readHeader is how the limiter reads one request header: its value and whether it is
// present, or ErrRepeatedHeader when it has several field lines. Lists that are meant to be
// split across lines (X-Forwarded-For) are read with forwardedFor instead.
func readHeader(h http.Header, name string) (value string, present bool, err error) {
	switch vs := h.Values(name); len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	default:
		return "", true, fmt.Errorf("header %s: %w", name, ErrRepeatedHeader)
	}
}

// hopByHop are the headers a proxy never forwards (RFC 9110 section 7.6.1), as
// net/http/httputil drops them.
var hopByHop = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forwardedHeader is h as the upstream will receive it from the reverse proxy: without the
// hop-by-hop headers, nor those the Connection header names. The limiter must read this
// view: a header it read but the upstream never sees lets a client choose its identity
// freely, or reuse one Idempotency-Key for requests the upstream cannot recognise as retries.
// h itself is returned, not copied, when it has none of them.
func forwardedHeader(h http.Header) http.Header {
	var drop []string
	for _, name := range hopByHop {
		if _, ok := h[name]; ok {
			drop = append(drop, name)
		}
	}
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = textproto.TrimString(name); name != "" {
				drop = append(drop, name)
			}
		}
	}
	if len(drop) == 0 {
		return h
	}
	out := h.Clone()
	for _, name := range drop {
		out.Del(name)
	}
	return out
}
