package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/internal/calendar"
)

// BenchmarkCheckCalendar sets a calendar day against a 24h period, same run, same Redis,
// FixedWindow, one round trip per check, 64 callers over 10,000 identities: what a calendar
// window costs a check (the limiter builds its ARGV once per window; the script parses the
// window and compares it with TIME). redis-µs/call is the script's own cost on the server
// (EVALSHA's usec_per_call over the run).
func BenchmarkCheckCalendar(b *testing.B) {
	rdb := benchRedis(b)
	day, err := calendar.New(calendar.Day, "Europe/Berlin")
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		limit Limit
	}{
		{"period=24h", Limit{Name: "daily", Requests: 1 << 40, Period: 24 * time.Hour}},
		{"calendar=Day", Limit{Name: "daily", Requests: 1 << 40, Calendar: &day}},
	} {
		p := newPolicy(b, FixedWindow, FailOpen, c.limit)
		b.Run(c.name, func(b *testing.B) {
			l := newLimiter(b, rdb, Options{Timeout: time.Second})
			if err := rdb.ConfigResetStat(context.Background()).Err(); err != nil {
				b.Fatal(err)
			}
			checkParallel(b, l, p)
			b.StopTimer()
			b.ReportMetric(evalshaMicros(b, rdb), "redis-µs/call")
		})
	}
}
