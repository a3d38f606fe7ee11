package httpcheck_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	redis "github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
)

// TestCheckAPICalendarMonth: a policy of 3 per calendar month in America/New_York, checked
// through the check API on a redis-server whose clock stands 90 seconds before the month
// ends: 3 admitted, then 429 with Retry-After, RateLimit's t and retryAfterMs at the true
// local month end, and RateLimit-Policy's w the month's length (30 days and an hour: DST
// ended in November).
func TestCheckAPICalendarMonth(t *testing.T) {
	redistest.RequireRedis(t)
	clock := redistest.NewClock(t)
	srv := redistest.StartServer(t, redistest.WithClock(clock))
	o := srv.Options()
	o.ContextTimeoutEnabled = true
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	p := sidecartest.Policy("monthly", 3, func(s *v1alpha1.RateLimitPolicySpec) {
		s.Algorithm = v1alpha1.AlgorithmFixedWindow
		s.Limits[0].Name, s.Limits[0].Period = "monthly", v1alpha1.Limit{}.Period
		s.Limits[0].Calendar = &v1alpha1.CalendarPeriod{Unit: v1alpha1.CalendarMonth, TimeZone: "America/New_York"}
	})
	rig := sidecartest.StartOn(t, srv, rdb, limiter.Options{}, p)
	h := &httpcheck.Handler{Engine: rig.Engine}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock.Set(t, time.Date(2027, 11, 30, 23, 58, 30, 0, ny))
	for i := range 3 {
		if code, resp, _, body := scCheck(t, h, `{"policy":"monthly","identity":"alice"}`); code != http.StatusOK || resp.Remaining != int64(2-i) {
			t.Fatalf("check %d: %d %s", i, code, body)
		}
	}
	code, resp, hdr, body := scCheck(t, h, `{"policy":"monthly","identity":"alice"}`)
	if code != http.StatusTooManyRequests || resp.RetryAfterMs < 88_000 || resp.RetryAfterMs > 90_000 {
		t.Fatalf("4th check: %d %s", code, body)
	}
	if ra := hdr.Get("Retry-After"); ra != "89" && ra != "90" {
		t.Errorf("Retry-After %q, want the 90 s to the month's end", ra)
	}
	if got, want := hdr.Get("RateLimit-Policy"), `"monthly/monthly";q=3;w=2595600`; got != want {
		t.Errorf("RateLimit-Policy %s, want %s", got, want)
	}
	rec := httptest.NewRecorder()
	(&httpcheck.PlanHandler{Engine: rig.Engine}).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, httpcheck.PlanPath,
		strings.NewReader(`{"policy":"monthly","identity":"alice"}`)))
	if want := `"calendar":{"unit":"Month","timeZone":"America/New_York"}`; rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("plan: %d %s, want %s", rec.Code, rec.Body.String(), want)
	}
	clock.Set(t, time.Date(2027, 12, 1, 0, 0, 0, 0, ny))
	if code, _, _, body := scCheck(t, h, `{"policy":"monthly","identity":"alice"}`); code != http.StatusOK {
		t.Fatalf("on December 1st: %d %s", code, body)
	}
}
