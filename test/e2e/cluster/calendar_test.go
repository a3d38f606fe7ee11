package cluster_test

import (
	"fmt"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// calendarZone is a zone far from any machine's (UTC+14): the sidecar in the pod finds it in
// the time zone database its binary carries, whatever the image holds.
const calendarZone = "Pacific/Kiritimati"

// calendarQuotaPolicy is 2 requests per calendar day in calendarZone per X-User on /daily.
const calendarQuotaPolicy = `apiVersion: policy.ratelimit.dev/v1alpha1
kind: RateLimitPolicy
metadata:
  name: daily-quota
spec:
  match: {http: [{pathPrefixes: [/daily]}]}
  identity: {sources: [{type: Header, header: {name: X-User}}]}
  algorithm: FixedWindow
  limits: [{name: daily, requests: 2, calendar: {unit: Day, timeZone: ` + calendarZone + `}}]
  failureMode: FailClosed
`

// calendarQuota applies a calendar quota in the watching namespace and asks the example
// app's sidecar three times as one caller: 200, 200, then 429 with a Retry-After to the next
// midnight in calendarZone (the Redis pod's clock against the sidecar's zone database).
func (j *journey) calendarQuota(t *testing.T) {
	c := j.c
	apply(t, c, watchNS, calendarQuotaPolicy)
	kc(t, c, "-n", watchNS, "wait", "--for=condition=Ready", "rlp/daily-quota", "--timeout=60s")
	loc, err := time.LoadLocation(calendarZone)
	if err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, 2*time.Minute, "the calendar quota enforced", func() error {
		user := fmt.Sprintf("daily-%s-%d", j.run, time.Now().UnixNano())
		var codes []int
		var last reply
		for range 3 {
			j.seq++
			r, err := j.s.get(t.Context(), watchNS, "echo", "/daily", map[string]string{"X-User": user, "X-API-Key": fmt.Sprintf("k-%s-%d", j.run, j.seq)})
			if err != nil {
				return err
			}
			codes, last = append(codes, r.status), r
		}
		if fmt.Sprint(codes) != "[200 200 429]" {
			return fmt.Errorf("as %s: %v, want [200 200 429]", user, codes)
		}
		now := time.Now().In(loc)
		midnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, loc)
		retry, err := strconv.ParseFloat(last.header.Get("Retry-After"), 64)
		if err != nil || math.Abs(retry-time.Until(midnight).Seconds()) > 30 {
			return fmt.Errorf("Retry-After %q, want the %s to midnight in %s", last.header.Get("Retry-After"), time.Until(midnight).Round(time.Second), calendarZone)
		}
		j.quotaUser = user
		return nil
	})
}
