package publishing

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// An applied override's message says what its calendar limits count per.
func TestOverrideGivesCalendar(t *testing.T) {
	got := overrideGives(snapshot.Override{Limits: []snapshot.Limit{
		{Name: "monthly", Requests: 3, PeriodMs: 2_678_400_000, Calendar: &snapshot.Calendar{Unit: "Month", TimeZone: "Europe/Berlin"}},
		{Name: "per-second", Requests: 10, PeriodMs: 1000},
	}})
	if want := "limits monthly: 3 per calendar Month in Europe/Berlin, per-second: 10 per 1s"; got != want {
		t.Errorf("overrideGives = %q, want %q", got, want)
	}
}
