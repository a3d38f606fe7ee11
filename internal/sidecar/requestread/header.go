package requestread

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// ErrRepeatedHeader refuses a request that sends a header the limiter reads on several field
// lines: the limiter would read one value while the upstream may read the first, the last or
// all of them joined, and the two would disagree about who the caller is, what the request
// costs or whether it is a retry.
var ErrRepeatedHeader = errors.New("sent on several field lines, so the limiter and the upstream could read different values")

// Header is how the limiter reads one request header: its value and whether it is present,
// or ErrRepeatedHeader when it has several field lines. Lists that are meant to be split
// across lines (X-Forwarded-For) are read with ForwardedFor instead.
func Header(h http.Header, name string) (value string, present bool, err error) {
	switch vs := h.Values(name); len(vs) {
	case 0:
		return "", false, nil
	case 1:
		return vs[0], true, nil
	default:
		return "", true, fmt.Errorf("header %s: %w", name, ErrRepeatedHeader)
	}
}

// ForwardedFor lists X-Forwarded-For hops, left to right, across repeated field lines.
func ForwardedFor(h http.Header) []string {
	var hops []string
	for _, v := range h.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	return hops
}
