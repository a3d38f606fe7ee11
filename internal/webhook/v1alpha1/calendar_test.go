package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	webhookv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/internal/webhook/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

// monthlyPolicy is FixedWindow, 3 per calendar month in zone and 10 per second.
func monthlyPolicy(zone string) *policyv1alpha1.RateLimitPolicy {
	p := policytest.New("shop", "monthly", policytest.TypeMeta, policytest.Algorithm(policyv1alpha1.AlgorithmFixedWindow),
		policytest.FailureMode(policyv1alpha1.FailureModeFailOpen))
	p.Spec.Limits = append([]policyv1alpha1.Limit{{Name: "monthly", Requests: 3,
		Calendar: &policyv1alpha1.CalendarPeriod{Unit: policyv1alpha1.CalendarMonth, TimeZone: zone}}}, p.Spec.Limits...)
	return p
}

// The validating webhook accepts a calendar policy (with leases too) and refuses, on its
// field, a calendar under another algorithm or in the machine's zone.
func TestValidateCalendar(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	leases := monthlyPolicy("UTC")
	leases.Spec.HotKeys = &policyv1alpha1.HotKeys{Leases: policyv1alpha1.LeaseModeOn}
	if w, err := v.ValidateCreate(context.Background(), defaulted(monthlyPolicy("Europe/Berlin"))); err != nil || len(w) != 0 {
		t.Fatalf("want accepted without warnings, got warnings %q, error %v", w, err)
	}
	// Leases draw their usual warning, nothing about the calendar.
	if w, err := v.ValidateCreate(context.Background(), defaulted(leases)); err != nil || len(w) != 1 || !strings.Contains(w[0], "spec.hotKeys.leases") {
		t.Fatalf("with leases: want accepted with the leases warning, got warnings %q, error %v", w, err)
	}
	gcra := monthlyPolicy("")
	gcra.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	for _, tc := range []invalid{
		{"calendar under GCRA", defaulted(gcra), "spec.limits[0].calendar", "calendar windows are for FixedWindow"},
		{"the machine's zone", defaulted(monthlyPolicy("Local")), "spec.limits[0].calendar.timeZone", "the machine's zone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.ValidateCreate(context.Background(), tc.p)
			assertInvalid(t, err, tc.p.Name, tc.field, tc.msg)
		})
	}
}

// A calendar policy may keep a TTL shorter than its month: the limiter keeps each calendar
// key until its window ends.
func TestValidateCalendarShortTTL(t *testing.T) {
	p := monthlyPolicy("Europe/Berlin")
	p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{TTL: &metav1.Duration{Duration: time.Hour}}
	if _, err := (&webhookv1alpha1.Validator{}).ValidateCreate(context.Background(), defaulted(p)); err != nil {
		t.Fatalf("refused a calendar policy with ttl 1h: %v", err)
	}
}
