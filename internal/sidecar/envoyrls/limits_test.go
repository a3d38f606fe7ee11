package envoyrls

import (
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// TestCalendarLimitsReportTheirUnit: a calendar limit is reported exactly, in its unit;
// a period limit of the same nominal length keeps the rounded report.
func TestCalendarLimitsReportTheirUnit(t *testing.T) {
	for _, c := range []struct {
		limit snapshot.Limit
		n     uint32
		unit  rlsv3.RateLimitResponse_RateLimit_Unit
	}{
		{snapshot.Limit{Name: "d", Requests: 1000, PeriodMs: 86_400_000, Calendar: &snapshot.Calendar{Unit: "Day", TimeZone: "UTC"}}, 1000, rlsv3.RateLimitResponse_RateLimit_DAY},
		{snapshot.Limit{Name: "w", Requests: 7, PeriodMs: 604_800_000, Calendar: &snapshot.Calendar{Unit: "Week", TimeZone: "Asia/Tokyo"}}, 7, rlsv3.RateLimitResponse_RateLimit_WEEK},
		{snapshot.Limit{Name: "m", Requests: 100_000, PeriodMs: 2_678_400_000, Calendar: &snapshot.Calendar{Unit: "Month", TimeZone: "Europe/Berlin"}}, 100_000, rlsv3.RateLimitResponse_RateLimit_MONTH},
		{snapshot.Limit{Name: "p", Requests: 100_000, PeriodMs: 2_678_400_000}, 3225, rlsv3.RateLimitResponse_RateLimit_DAY},
	} {
		got := envoyRateLimit("api", &c.limit)
		if got.GetName() != "api/"+c.limit.Name || got.GetRequestsPerUnit() != c.n || got.GetUnit() != c.unit {
			t.Errorf("%+v: reported %d per %v, want %d per %v", c.limit, got.GetRequestsPerUnit(), got.GetUnit(), c.n, c.unit)
		}
	}
}
