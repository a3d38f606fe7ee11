package requestread

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/ratelimit-dev/ratelimit-operator/internal/jwtpayload"
)

// jwtClaim is a string or number claim of the "Bearer <jwt>" credential authz (decoded,
// not verified: the gateway in front verified it); dots walk nested objects.
func jwtClaim(authz, claim string) string {
	v, ok := jwtpayload.Decode(authz)
	if !ok {
		return ""
	}
	for _, k := range strings.Split(claim, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[k]
	}
	return scalar(v)
}

func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

func headerOr(h, def string) string {
	if h == "" {
		return def
	}
	return h
}
