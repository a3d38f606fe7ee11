package condition

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/interpreter"

	"github.com/ratelimit-dev/ratelimit-operator/internal/jwtpayload"
)

// Request is what a condition can read of one request. Every field is optional: a front
// fills in what it has (Envoy RLS has descriptors and no headers).
type Request struct {
	// Method is the method the upstream will run, upper-case.
	Method string
	// Host is the request's host, lower-case and without a port.
	Host string
	// Path is the request's normalized path.
	Path string
	// Header is the request's header as the upstream will receive it.
	Header http.Header
	// Descriptors lists an Envoy descriptor's entries by key, called only when a condition
	// reads them; nil without a descriptor.
	Descriptors func() map[string]string
}

// Holds reports whether c holds for r. A condition that fails to evaluate (a missing claim,
// a value of another type, a request costlier than MaxCost) does not hold; a header it read
// that was sent on several field lines is ErrRepeatedHeader, and the request must be
// refused.
func (c *Condition) Holds(r *Request) (bool, error) {
	a := activation{req: r}
	prg := c.guarded
	if within(r) {
		prg = c.fast
	}
	out, _, err := prg.Eval(&a)
	if a.repeated != "" {
		return false, fmt.Errorf("header %s: %w", a.repeated, ErrRepeatedHeader)
	}
	if err != nil {
		return false, nil //nolint:nilerr // a failed condition does not select its tier (documented on the API)
	}
	return out == types.True, nil
}

// within reports whether r lies within the bounds the cost estimate assumed, so that its
// evaluation needs no cost tracking. Requests with descriptors are not checked entry by
// entry: they are always tracked.
func within(r *Request) bool {
	if r.Descriptors != nil || len(r.Path) > maxStringBytes || len(r.Host) > maxStringBytes ||
		len(r.Header) > maxHeaders {
		return false
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			if len(v) > maxStringBytes || (len(v) > maxTokenBytes && strings.EqualFold(k, "Authorization")) {
				return false
			}
		}
	}
	return true
}

// activation resolves a condition's names on demand: the token is decoded only when a
// condition reads claims.
type activation struct {
	req      *Request
	repeated string // a header read on several field lines, refusing the request
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case VarMethod:
		return types.String(a.req.Method), true
	case VarHost:
		return types.String(a.req.Host), true
	case VarPath:
		return types.String(a.req.Path), true
	case VarHeaders:
		return &headerMap{a: a}, true
	case VarClaims:
		return claims(a.req.Header), true
	case VarDescriptors:
		return descriptors(a.req), true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// claims is the payload of the request's bearer token as a CEL map, numbers as int or
// double; an empty map without a token.
func claims(h http.Header) ref.Val {
	var authz string
	if vs := h.Values("Authorization"); len(vs) == 1 {
		authz = vs[0]
	}
	payload, ok := jwtpayload.Decode(authz)
	m, isMap := payload.(map[string]any)
	if !ok || !isMap {
		return types.NewStringInterfaceMap(types.DefaultTypeAdapter, map[string]any{})
	}
	return types.DefaultTypeAdapter.NativeToValue(numbers(m))
}

// numbers replaces json.Number in v by int64 or float64, which CEL compares as numbers.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}

// descriptors is the request's descriptor entries as a CEL map.
func descriptors(r *Request) ref.Val {
	m := map[string]string{}
	if r.Descriptors != nil {
		m = r.Descriptors()
	}
	return types.NewStringStringMap(types.DefaultTypeAdapter, m)
}
