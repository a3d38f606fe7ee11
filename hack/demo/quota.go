package main

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed demo-quota.yaml
var demoQuota []byte

// quota applies demo-quota (3 per calendar month in Europe/Berlin on /reports), waits until
// the sidecar enforces it, and sends 5 requests as one caller: 3 admitted, then 429s whose
// Retry-After is the time to midnight on the 1st of next month in Berlin.
func (d *demo) quota(ctx context.Context) error {
	d.step("Calendar quota: kubectl apply demo-quota, 3 per calendar month (Europe/Berlin) on /reports; 5 requests as quota-quinn")
	if out, err := d.kubectl(ctx, demoQuota, "apply", "-n", d.opts.namespace, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply demo-quota: %w\n%s", err, out)
	}
	if err := d.waitForPolicy(ctx, "/reports", "demo-quota/monthly"); err != nil {
		return err
	}
	admitted, last := 0, answer{}
	for range 5 {
		a, err := d.send(ctx, http.MethodGet, "/reports", "X-API-Key", "quota-quinn")
		if err != nil {
			return err
		}
		if a.code == http.StatusOK {
			admitted++
		}
		last = a
	}
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		return fmt.Errorf("time zone: %w", err)
	}
	now := time.Now().In(berlin)
	next := time.Date(now.Year(), now.Month()+1, 1, 0, 0, 0, 0, berlin)
	d.say("5 sent, %d admitted; last: %s  RateLimit-Policy: %s", admitted, last, last.policy)
	d.say("midnight on %s in Berlin is %s away", next.Format("2 January"), time.Until(next).Round(time.Second))
	retry, err := strconv.ParseFloat(last.retryAfter, 64)
	if admitted != 3 || last.code != http.StatusTooManyRequests || err != nil || math.Abs(retry-time.Until(next).Seconds()) > 5 {
		return fmt.Errorf("demo-quota admitted %d of 5 and answered %s, want 3 and a 429 with Retry-After until %s", admitted, last, next)
	}
	d.done("calendar quota: 3 of 5 admitted, Retry-After is the time to the 1st of next month in Berlin")
	return nil
}

// waitForPolicy polls path (a new caller each time) until the sidecar reports the quota
// policy want ("<policy>/<limit>") in RateLimit-Policy, for up to 30 s.
func (d *demo) waitForPolicy(ctx context.Context, path, want string) error {
	start := time.Now()
	for i := 0; ; i++ {
		a, err := d.send(ctx, http.MethodGet, path, "X-API-Key", fmt.Sprintf("probe-%d", i))
		if err != nil {
			return err
		}
		if strings.Contains(a.policy, `"`+want+`"`) {
			return nil
		}
		if time.Since(start) > 30*time.Second {
			return fmt.Errorf("the sidecar still does not enforce %s 30s after it was applied (RateLimit-Policy: %q)", want, a.policy)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
