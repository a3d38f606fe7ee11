package engine

import (
	"fmt"
	"net/http"
	"strconv"
)

// StatedCost turns a cost stated by the caller (a check API field, an Envoy hits_addend, or
// a header) into the cost to debit: 0 means the policy's default; a policy with cost.max
// refuses more than that.
func (r *Rule) StatedCost(n int64) (int64, error) {
	switch {
	case n == 0:
		return max(r.Entry.Cost.Default, 1), nil
	case n < 0:
		return 0, fmt.Errorf("cost %d is negative", n)
	case r.Entry.Cost.Max > 0 && n > r.Entry.Cost.Max:
		return 0, fmt.Errorf("cost %d exceeds policy %s's cost.max %d", n, r.Name(), r.Entry.Cost.Max)
	}
	return n, nil
}

// httpCost is the cost of an HTTP request: the policy's cost header when the request has it
// (a whole number from 1 to cost.max), else the default.
func (r *Rule) httpCost(h http.Header) (int64, error) {
	name := r.Entry.Cost.Header
	if name == "" {
		return max(r.Entry.Cost.Default, 1), nil
	}
	v, present, err := readHeader(h, name)
	if err != nil {
		return 0, err
	}
	if !present {
		return max(r.Entry.Cost.Default, 1), nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("header %s: %q is not a whole number of at least 1", name, truncate(v, 32))
	}
	if n, err = r.StatedCost(n); err != nil {
		return 0, fmt.Errorf("header %s: %w", name, err)
	}
	return n, nil
}

// httpRequestID is the idempotency key of an HTTP request, or "".
func (r *Rule) httpRequestID(h http.Header) (string, error) {
	if r.Entry.Idempotency == nil || r.Entry.Idempotency.Header == "" {
		return "", nil
	}
	v, _, err := readHeader(h, r.Entry.Idempotency.Header)
	return v, err
}

// descriptorRequestID is the idempotency key carried in an Envoy descriptor, or "".
func (r *Rule) descriptorRequestID(entries []DescriptorEntry) string {
	if r.Entry.Idempotency == nil || r.Entry.Idempotency.DescriptorKey == "" {
		return ""
	}
	for _, d := range entries {
		if d.Key == r.Entry.Idempotency.DescriptorKey {
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
