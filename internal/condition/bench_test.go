package condition

import (
	"net/http"
	"testing"
)

// BenchmarkHolds is the per-request cost of choosing a tier: a header comparison (the
// common condition), and a claim comparison, which decodes the bearer token.
func BenchmarkHolds(b *testing.B) {
	h := http.Header{}
	for _, k := range []string{"Accept", "User-Agent", "X-Request-Id", "Content-Type", "X-Api-Key", "X-Plan"} {
		h.Set(k, "value-"+k)
	}
	h.Set("Authorization", token(`{"sub":"u1","plan":"pro","exp":1900000000}`))
	for _, tc := range []struct{ name, expr string }{
		{"header", `headers["x-plan"] == "value-X-Plan"`},
		{"method-path", `method == "GET" && path.startsWith("/v1/")`},
		{"claim", `claims.plan == "pro"`},
	} {
		c, err := Compile(tc.expr)
		if err != nil {
			b.Fatal(err)
		}
		req := &Request{Method: "GET", Host: "a.example", Path: "/v1/x", Header: h}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := c.Holds(req); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}
