package requestread

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// StatedCost turns a cost stated by the caller (a check API field, an Envoy hits_addend, or
// a header) into the cost to debit for policy e: 0 means the policy's default; a policy
// with cost.max refuses more than that.
func StatedCost(e *snapshot.Entry, n int64) (int64, error) {
	switch {
	case n == 0:
		return max(e.Cost.Default, 1), nil
	case n < 0:
		return 0, fmt.Errorf("cost %d is negative", n)
	case e.Cost.Max > 0 && n > e.Cost.Max:
		return 0, fmt.Errorf("cost %d exceeds policy %s's cost.max %d", n, e.Name, e.Cost.Max)
	}
	return n, nil
}

// HTTPCost is the cost of an HTTP request for policy e: the policy's cost header when the
// request has it (a whole number from 1 to cost.max), else the default.
func HTTPCost(e *snapshot.Entry, h http.Header) (int64, error) {
	name := e.Cost.Header
	if name == "" {
		return max(e.Cost.Default, 1), nil
	}
	v, present, err := Header(h, name)
	if err != nil {
		return 0, err
	}
	if !present {
		return max(e.Cost.Default, 1), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("header %s: %q is not a whole number of at least 1", name, truncate(v, 32))
	}
	if n, err = StatedCost(e, n); err != nil {
		return 0, fmt.Errorf("header %s: %w", name, err)
	}
	return n, nil
}

// HTTPRequestID is the idempotency key of an HTTP request for policy e, or "".
func HTTPRequestID(e *snapshot.Entry, h http.Header) (string, error) {
	if e.Idempotency == nil || e.Idempotency.Header == "" {
		return "", nil
	}
	v, _, err := Header(h, e.Idempotency.Header)
	return v, err
}

// DescriptorRequestID is the idempotency key carried in an Envoy descriptor for policy e,
// or "".
func DescriptorRequestID(e *snapshot.Entry, entries []DescriptorEntry) string {
	if e.Idempotency == nil || e.Idempotency.DescriptorKey == "" {
		return ""
	}
	for _, d := range entries {
		if d.Key == e.Idempotency.DescriptorKey {
			return d.Value
		}
	}
	return ""
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
