package ratelimitheaders

import (
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// TestCalendarWindowIsTheLocalDay: RateLimit-Policy's w for a calendar day is the length of
// the local day holding the present (23 hours when DST starts, 25 when it ends), for a
// week and a month the same; a period limit keeps its period. Retry-After is the script's
// answer (the true boundary), unchanged.
func TestCalendarWindowIsTheLocalDay(t *testing.T) {
	cal := func(unit string) snapshot.Limit {
		return snapshot.Limit{Name: unit, Requests: 5, PeriodMs: 86_400_000,
			Calendar: &snapshot.Calendar{Unit: unit, TimeZone: "Europe/Berlin"}}
	}
	rule := &engine.Rule{Entry: snapshot.Entry{Name: "api", Limits: []snapshot.Limit{
		cal("Day"), cal("Week"), cal("Month"), {Name: "minute", Requests: 60, PeriodMs: 60_000}}}}
	outs := []engine.Outcome{{Rule: rule, Decision: limiter.Decision{LimitName: "Day", RetryAfter: 3 * time.Hour}}}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Time
		want string
	}{
		{time.Date(2027, 3, 28, 21, 0, 0, 0, berlin), `"api/Day";q=5;w=82800, "api/Week";q=5;w=601200, "api/Month";q=5;w=2674800, "api/minute";q=60;w=60`},
		{time.Date(2027, 10, 31, 21, 0, 0, 0, berlin), `"api/Day";q=5;w=90000, "api/Week";q=5;w=608400, "api/Month";q=5;w=2682000, "api/minute";q=60;w=60`},
		{time.Date(2027, 2, 10, 12, 0, 0, 0, berlin), `"api/Day";q=5;w=86400, "api/Week";q=5;w=604800, "api/Month";q=5;w=2419200, "api/minute";q=60;w=60`},
	} {
		got := map[string]string{}
		for _, f := range forAt(outs, c.at) {
			got[f.Name] = f.Value
		}
		if got[HeaderPolicy] != c.want {
			t.Errorf("%s: RateLimit-Policy %s\nwant %s", c.at, got[HeaderPolicy], c.want)
		}
		if got[HeaderRetryAfter] != "10800" {
			t.Errorf("%s: Retry-After %q, want 10800", c.at, got[HeaderRetryAfter])
		}
	}
}

// TestNamesCannotAddHeaderItems: a snapshot read from a ConfigMap the namespace's editors
// may write can name a limit anything. A name holding a quote and a comma would have closed
// the sf-string and added an item naming another policy's quota to RateLimit-Policy (and
// RateLimit); escaped, each header keeps one item per limit, and the name's control and
// non-ASCII bytes become '?'.
func TestNamesCannotAddHeaderItems(t *testing.T) {
	forged := `x";q=1000000;w=1, "payments/per-day`
	rule := &engine.Rule{Entry: snapshot.Entry{Name: "api", Limits: []snapshot.Limit{
		{Name: forged, Requests: 5, PeriodMs: 60_000}, {Name: "a\\b\nü", Requests: 9, PeriodMs: 1000}}}}
	outs := []engine.Outcome{{Rule: rule, Decision: limiter.Decision{Allowed: true, LimitName: forged, Remaining: 4}}}
	got := map[string]string{}
	for _, f := range forAt(outs, time.Now()) {
		got[f.Name] = f.Value
	}
	wantPolicy := `"api/x\";q=1000000;w=1, \"payments/per-day";q=5;w=60, "api/a\\b???";q=9;w=1`
	if got[HeaderPolicy] != wantPolicy || sfItems(got[HeaderPolicy]) != 2 {
		t.Errorf("RateLimit-Policy %s (%d items)\nwant %s (2 items)", got[HeaderPolicy], sfItems(got[HeaderPolicy]), wantPolicy)
	}
	if n := sfItems(got[HeaderLimit]); n != 1 || !strings.HasPrefix(got[HeaderLimit], `"api/x\";q=1000000;w=1, \"payments/per-day";r=4;`) {
		t.Errorf("RateLimit %s (%d items), want one item naming the forged limit escaped", got[HeaderLimit], n)
	}
}

// sfItems counts the members of a structured-field list: commas outside sf-strings, plus one.
func sfItems(v string) int {
	n, quoted := 1, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case !quoted && c == ',':
			n++
		}
	}
	return n
}
