package limiterspec_test

import (
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiterspec"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// A calendar limit reaches the limiter with its unit, its zone loaded and the unit's nominal
// length as Period (whatever periodMs says); a zone this build does not know gives a
// Calendar without a Location, for NewPolicy to refuse; a period limit has no Calendar.
func TestCalendarLimits(t *testing.T) {
	e := snapshot.Entry{Name: "monthly", Algorithm: "FixedWindow", StateKey: "{rl:shop/monthly:${identity}}:${limit}", TTLMs: 3_600_000,
		Limits: []snapshot.Limit{
			{Name: "monthly", Requests: 3, PeriodMs: 1, Calendar: &snapshot.Calendar{Unit: "Month", TimeZone: "Europe/Berlin"}},
			{Name: "per-second", Requests: 10, PeriodMs: 1000},
			{Name: "elsewhere", Requests: 3, PeriodMs: 86_400_000, Calendar: &snapshot.Calendar{Unit: "Day", TimeZone: "Moon/Tranquility"}},
		},
		Tiers: []snapshot.Tier{{Name: "pro", When: "true", Limits: []snapshot.Limit{
			{Name: "weekly", Requests: 9, PeriodMs: 604_800_000, Calendar: &snapshot.Calendar{Unit: "Week", TimeZone: "UTC"}},
		}}},
	}
	ls := limiterspec.Of("shop", e).Limits
	m := ls[0]
	if m.Calendar == nil || m.Calendar.Unit != calendar.Month || m.Calendar.Location == nil ||
		m.Calendar.Location.String() != "Europe/Berlin" || m.Period != 744*time.Hour {
		t.Errorf("monthly limit %+v (calendar %+v), want Month in Europe/Berlin, period 744h", m, m.Calendar)
	}
	if ls[1].Calendar != nil || ls[1].Period != time.Second {
		t.Errorf("period limit %+v, want 1s without a calendar", ls[1])
	}
	if c := ls[2].Calendar; c == nil || c.Unit != calendar.Day || c.Location != nil {
		t.Errorf("unknown zone gave calendar %+v, want Day without a Location", c)
	}
	w := limiterspec.OfTier("shop", e, 0).Limits[0]
	if w.Calendar == nil || w.Calendar.Unit != calendar.Week || w.Calendar.Location == nil || w.Calendar.Location.String() != "UTC" {
		t.Errorf("tier limit calendar %+v, want Week in UTC", w.Calendar)
	}
}
