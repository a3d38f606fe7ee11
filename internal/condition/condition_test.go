package condition

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"
)

func token(payload string) string {
	return "Bearer e30." + base64.RawURLEncoding.EncodeToString([]byte(payload)) + ".sig"
}

func TestHolds(t *testing.T) {
	h := http.Header{}
	h.Set("X-Plan", "pro")
	h.Set("Authorization", token(`{"plan":"gold","level":3,"org":{"id":"o1"}}`))
	req := &Request{Method: "POST", Host: "api.example.com", Path: "/v1/chat", Header: h,
		Descriptors: func() map[string]string { return map[string]string{"tier": "b"} }}
	for _, tc := range []struct {
		expr string
		want bool
	}{
		{`headers["x-plan"] == "pro"`, true},
		{`headers["X-PLAN"] == "pro"`, true},
		{`headers["x-plan"] == "free"`, false},
		{`headers["x-absent"] == ""`, false}, // absent: fails, does not hold
		{`"x-plan" in headers`, true},
		{`"x-absent" in headers`, false},
		{`has(headers.x_absent)`, false},
		{`headers.exists(k, k == "x-plan")`, true},
		{`claims.plan == "gold"`, true},
		{`claims.level >= 3`, true},
		{`claims.org.id == "o1"`, true},
		{`has(claims.missing) && claims.missing == "x"`, false},
		{`claims.missing == "x"`, false},
		{`method == "POST" && host == "api.example.com" && path.startsWith("/v1/")`, true},
		{`descriptors["tier"] == "b"`, true},
		{`path.matches("^/v[0-9]+/chat$")`, true},
	} {
		c, err := Compile(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		got, err := c.Holds(req)
		if err != nil || got != tc.want {
			t.Errorf("%s = %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
}

func TestHoldsWithoutToken(t *testing.T) {
	c, err := Compile(`has(claims.plan) && claims.plan == "pro"`)
	if err != nil {
		t.Fatal(err)
	}
	for _, authz := range []string{"", "Basic abc", "Bearer not-a-jwt", token(`[1,2]`)} {
		h := http.Header{}
		if authz != "" {
			h.Set("Authorization", authz)
		}
		if got, err := c.Holds(&Request{Header: h}); got || err != nil {
			t.Errorf("authz %q: %v, %v; want false, nil", authz, got, err)
		}
	}
}

// A header the condition reads on several field lines refuses the request: the condition
// and the upstream could read different values, and falling to another tier would let a
// caller pick its tier by sending the header twice.
func TestRepeatedHeaderRefuses(t *testing.T) {
	for _, expr := range []string{`headers["x-plan"] == "free"`, `"x-plan" in headers`, `headers.exists(k, k == "a")`} {
		c, err := Compile(expr)
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{"X-Plan": {"free", "pro"}}
		if _, err := c.Holds(&Request{Header: h}); !errors.Is(err, ErrRepeatedHeader) {
			t.Errorf("%s: err %v, want ErrRepeatedHeader", expr, err)
		}
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct{ expr, want string }{
		{`headers["x"]`, "must be a bool"},
		{`method == 1`, "no matching overload"},
		{`nope == "x"`, "undeclared reference"},
		{`headers["x"] ==`, "Syntax error"},
		{`headers.all(k, headers.all(j, headers[k].matches(headers[j])))`, "estimated cost"},
		{`headers.exists(k, headers[k].matches("a+b+c+d+") && path.matches("x.*y.*z"))`, "estimated cost"},
	} {
		_, err := Compile(tc.expr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.expr, err, tc.want)
		}
	}
}

// A request larger than the cost estimate assumed is evaluated with its cost tracked and
// cut off at MaxCost: its condition does not hold, however long the caller made it.
func TestLargeRequestIsCutOff(t *testing.T) {
	c, err := Compile(`path.contains("needle") || path.matches("^/(a|b)*c$")`)
	if err != nil {
		t.Fatal(err)
	}
	small := &Request{Path: "/" + strings.Repeat("a", 100) + "c", Header: http.Header{}}
	if ok, err := c.Holds(small); !ok || err != nil {
		t.Fatalf("small request: %v, %v; want true", ok, err)
	}
	huge := &Request{Path: "/" + strings.Repeat("a", 4<<20) + "c", Header: http.Header{}}
	if within(huge) {
		t.Fatal("a 4 MiB path counted as within the estimate's bounds")
	}
	if ok, err := c.Holds(huge); ok || err != nil {
		t.Fatalf("huge request: %v, %v; want false (cut off at MaxCost)", ok, err)
	}
}
