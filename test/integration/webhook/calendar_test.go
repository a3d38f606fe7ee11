package webhook

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// calendarPolicy is FixedWindow, 3 per calendar month in Europe/Berlin and 10 per second.
func calendarPolicy(ns, name string) *policyv1alpha1.RateLimitPolicy {
	p := policytest.New(ns, name, policytest.Algorithm(policyv1alpha1.AlgorithmFixedWindow))
	p.Spec.Limits = append([]policyv1alpha1.Limit{calendarLimit("monthly", policyv1alpha1.CalendarMonth, "Europe/Berlin")}, p.Spec.Limits...)
	return p
}

// calendarLimit is 3 per calendar unit in zone.
func calendarLimit(name string, unit policyv1alpha1.CalendarUnit, zone string) policyv1alpha1.Limit {
	return policyv1alpha1.Limit{Name: name, Requests: 3, Calendar: &policyv1alpha1.CalendarPeriod{Unit: unit, TimeZone: zone}}
}

// TestCalendarThroughWebhook: a calendar policy passes both webhooks and is stored as it
// compiles; every calendar the limiter cannot run is refused by the validating webhook on
// its field.
func TestCalendarThroughWebhook(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "cal-")
	c, _ := kube.NewWarningClient(t, e)
	stored := createStored(t, c, calendarPolicy(ns, "monthly"))
	if _, errs := (policy.Rules{}).CompileAsIs(stored); len(errs) > 0 {
		t.Fatalf("stored calendar policy does not compile: %v", errs.ToAggregate())
	}
	if cal := stored.Spec.Limits[0].Calendar; cal == nil || cal.TimeZone != "Europe/Berlin" || stored.Spec.Limits[0].Period.Duration != 0 {
		t.Errorf("stored limit %+v (calendar %+v)", stored.Spec.Limits[0], cal)
	}
	for i, tc := range []struct {
		name   string
		mutate func(p *policyv1alpha1.RateLimitPolicy)
		field  string
		frags  []string
	}{
		{"calendar under TokenBucket", func(p *policyv1alpha1.RateLimitPolicy) { p.Spec.Algorithm = policyv1alpha1.AlgorithmTokenBucket },
			"spec.limits[0].calendar", []string{"calendar windows are for FixedWindow", "TokenBucket"}},
		{"the machine's zone", func(p *policyv1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Calendar.TimeZone = "Local" },
			"spec.limits[0].calendar.timeZone", []string{"the machine's zone"}},
		{"an unknown zone", func(p *policyv1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Calendar.TimeZone = "Mars/Olympus_Mons" },
			"spec.limits[0].calendar.timeZone", []string{`unknown time zone "Mars/Olympus_Mons"`}},
		{"an unknown zone in a tier", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Tiers = []policyv1alpha1.Tier{{Name: "pro", When: "true",
				Limits: []policyv1alpha1.Limit{calendarLimit("weekly", policyv1alpha1.CalendarWeek, "Europe/Atlantis")}}}
		}, "spec.tiers[0].limits[0].calendar.timeZone", []string{`unknown time zone "Europe/Atlantis"`}},
		{"a tier giving the name another zone", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Tiers = []policyv1alpha1.Tier{{Name: "pro", When: "true",
				Limits: []policyv1alpha1.Limit{calendarLimit("monthly", policyv1alpha1.CalendarMonth, "UTC")}}}
		}, "spec.tiers[0].limits[0].calendar", []string{`limit "monthly" has calendar Month in Europe/Berlin in spec.limits[0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := calendarPolicy(ns, fmt.Sprintf("bad-%d", i))
			tc.mutate(p)
			assertCause(t, c.Create(context.Background(), p), tc.field, tc.frags...)
			assertNotFound(t, c, ns, p.Name)
		})
	}
}

// TestCalendarPeriodOrCalendar: a limit with both or neither of period and calendar passes
// the mutating webhook and is refused by the API server's CEL rule.
func TestCalendarPeriodOrCalendar(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "cal-")
	c, _ := kube.NewWarningClient(t, e)
	for name, mutate := range map[string]func(l *policyv1alpha1.Limit){
		"both":    func(l *policyv1alpha1.Limit) { l.Period = metav1.Duration{Duration: time.Hour} },
		"neither": func(l *policyv1alpha1.Limit) { l.Calendar = nil },
	} {
		t.Run(name, func(t *testing.T) {
			p := calendarPolicy(ns, name)
			mutate(&p.Spec.Limits[0])
			assertFieldCause(t, c.Create(context.Background(), p), "spec.limits[0]", "set exactly one of period and calendar")
			assertNotFound(t, c, ns, p.Name)
		})
	}
}

// TestCalendarShortTTL: a calendar policy may keep a TTL shorter than its window (the
// limiter keeps each calendar key until its window ends).
func TestCalendarShortTTL(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "cal-")
	c, _ := kube.NewWarningClient(t, e)
	p := calendarPolicy(ns, "short-ttl")
	p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{TTL: &metav1.Duration{Duration: time.Hour}}
	if stored := createStored(t, c, p); stored.Spec.KeyLayout.TTL.Duration != time.Hour {
		t.Errorf("stored ttl %v, want the 1h written", stored.Spec.KeyLayout.TTL)
	}
}
