package adversarial

import (
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/controller/publishing"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/checkwire"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/sidecartest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/snapshottest"
)

// Class: an edit corrupting live identities (issue 13, item 3). Raising a window's period
// from 1s to 1h left every identity's stored window "in the future": 429 with a retry-after
// of about 2.2 million hours, and remaining -40 after requests was lowered.
func TestRaisingAPeriodDoesNotLockCallersOut(t *testing.T) {
	for _, alg := range []v1alpha1.Algorithm{v1alpha1.AlgorithmFixedWindow, v1alpha1.AlgorithmSlidingWindow} {
		t.Run(string(alg), func(t *testing.T) {
			r := newRig(t, limiter.Options{DenyCacheSize: 100}, newPolicy("api", alg, 50, time.Second))
			r.count(50, http.MethodGet, "/api", "X-API-Key", "alice")
			r.load(newPolicy("api", alg, 10, time.Hour))
			resp := r.checkAPI(t, checkwire.Request{Policy: "api", Identity: "alice"})
			if resp.Allowed || resp.Remaining < 0 || resp.RetryAfterMs > 2*3600_000 || resp.ResetAfterMs > 2*3600_000 {
				t.Fatalf("after the edit to 10/h with 50 used: %+v; want denied, remaining >= 0, retry and reset within the new window", resp)
			}
		})
	}
}

// Class: rounding that admits more than the limit, and a representation that changes on the
// way to the sidecars (issue 13, item 4). 700000/s ran at 1000000/s; 10 per 1.9ms was
// published as 10 per 1ms. Both are refused at admission with the field to fix, and the
// controller leaves them out of the snapshot.
func TestUnrepresentableLimitsRefused(t *testing.T) {
	for name, c := range map[string]struct {
		alg      v1alpha1.Algorithm
		requests int64
		period   time.Duration
		field    string
	}{
		"700000 per second": {v1alpha1.AlgorithmTokenBucket, 700_000, time.Second, "spec.limits[0].requests"},
		"450000 per second": {v1alpha1.AlgorithmGCRA, 450_000, time.Second, "spec.limits[0].requests"},
		"10 per 1.9ms":      {v1alpha1.AlgorithmFixedWindow, 10, 1900 * time.Microsecond, "spec.limits[0].period"},
		"1200 per 1.5ms":    {v1alpha1.AlgorithmTokenBucket, 1200, 1500 * time.Microsecond, "spec.limits[0].period"},
	} {
		t.Run(name, func(t *testing.T) {
			p := newPolicy("fast", c.alg, c.requests, c.period)
			(policy.Rules{}).Default(p)
			if _, errs := (policy.Rules{}).CompileAsIs(p); !hasField(errs.ToAggregate(), c.field) {
				t.Fatalf("compiled; want a refusal on %s, got %v", c.field, errs.ToAggregate())
			}
		})
	}
}

// hasField reports whether err mentions field.
func hasField(err error, field string) bool {
	return err != nil && strings.Contains(err.Error(), field)
}

// Class: one bad policy turned into an outage (issue 13, items 4 and 5). A snapshot holding
// one policy a sidecar cannot compile was refused whole: new pods never became ready and
// every other policy of the namespace stopped following edits.
func TestOneUncompilablePolicyIsNoOutage(t *testing.T) {
	store, err := loadTampered(t, v1alpha1.AlgorithmGCRA, "bad", "new pod", func(e *snapshot.Entry) {
		e.Limits[0].PeriodMs = 0 // as a newer controller or a hand edit might
	})
	if err != nil {
		t.Fatalf("a new pod refused the namespace's snapshot for one bad policy: %v", err)
	}
	if set := store.Current(); set.Rule("good") == nil || set.Rule("bad") != nil {
		t.Fatalf("want the good policy enforced and the bad one refused alone")
	}
}

// loadTampered builds the snapshot of policies good and name (alg, 3 per hour, each on its
// own path), lets tamper change name's entry, reseals it and loads it into a new Store from
// source, as a sidecar loads a snapshot it did not get from this controller.
func loadTampered(t *testing.T, alg v1alpha1.Algorithm, name, source string, tamper func(*snapshot.Entry)) (*engine.Store, error) {
	t.Helper()
	good := newPolicy("good", alg, 3, time.Hour, onPaths("/good"))
	other := newPolicy(name, alg, 3, time.Hour, onPaths("/"+name))
	s := snapshottest.Build(t, ns, "127.0.0.1:6379", good, other)
	for i := range s.Policies {
		if s.Policies[i].Name == name {
			tamper(&s.Policies[i])
		}
	}
	store := &engine.Store{Namespace: ns}
	return store, store.Load(sidecartest.Reseal(t, s), source)
}

// checkAPI asks the check API and decodes its answer.
func (r *rig) checkAPI(t *testing.T, req checkwire.Request) checkwire.Response {
	t.Helper()
	var out checkwire.Response
	r.postJSON(t, httpcheck.Path, req, &out)
	return out
}

// postJSON posts req to path of the check API's server and decodes the answer into out
// (unless nil); it returns the status.
func (r *rig) postJSON(t *testing.T, path string, req, out any) int {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(r.check.URL+path, "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s answered %d: %v", path, resp.StatusCode, err)
		}
	}
	return resp.StatusCode
}

// Class: a hand-written snapshot (--snapshot-file) carrying what the API refuses (issue 13,
// item 9): two limits of one name would share one key. The sidecar refuses that policy alone;
// the rest of the file is enforced.
func TestSnapshotFileWithDuplicateLimitNamesRefused(t *testing.T) {
	store, err := loadTampered(t, v1alpha1.AlgorithmFixedWindow, "dup", "file", func(e *snapshot.Entry) {
		l := e.Limits[0]
		l.Requests = 1000
		e.Limits = append(e.Limits, l) // same name, other rate
	})
	if err != nil {
		t.Fatalf("the file refused whole: %v", err)
	}
	if set := store.Current(); set.Rule("dup") != nil || set.Rule("good") == nil || set.Refused() != 1 {
		t.Fatalf("dup loaded %v, good loaded %v, refused %d; want only dup refused", set.Rule("dup") != nil, set.Rule("good") != nil, set.Refused())
	}
}

// Class: an edit that does not compile lifting an enforced limit. Stored without the webhook
// (down, or a rule added by an upgrade), the policy was dropped from the snapshot: the limit
// vanished. The controller builds over what is published and keeps the last valid entry
// (the controller suite runs the whole loop: test/integration/controller TestInvalidEditKeepsLastValidVersion).
func TestInvalidEditKeepsTheLastValidVersion(t *testing.T) {
	valid := newPolicy("login", v1alpha1.AlgorithmGCRA, 5, time.Minute)
	valid.UID = "uid-1"
	published, owners, err := publishing.SnapshotOf(ns, snapshot.Redis{Mode: "standalone", Addrs: []string{"r:6379"}},
		[]v1alpha1.RateLimitPolicy{*valid})
	if err != nil {
		t.Fatal(err)
	}
	broken := valid.DeepCopy()
	broken.Spec.Limits[0].Period.Duration = 1500 * time.Microsecond // not whole milliseconds
	last := publishing.Published{Snapshot: published, Owners: owners}
	next, _, err := publishing.SnapshotOver(policy.Rules{}, ns, published.Redis, []v1alpha1.RateLimitPolicy{*broken}, last)
	if err != nil {
		t.Fatal(err)
	}
	if len(next.Policies) != 1 || !reflect.DeepEqual(next.Policies[0], published.Policies[0]) {
		t.Fatalf("after an invalid edit the snapshot holds %+v, want the last valid entry %+v", next.Policies, published.Policies)
	}
	recreated := broken.DeepCopy()
	recreated.UID = "uid-2" // deleted and created again: it inherits nothing
	if next, _, _ := publishing.SnapshotOver(policy.Rules{}, ns, published.Redis, []v1alpha1.RateLimitPolicy{*recreated}, last); len(next.Policies) != 0 {
		t.Fatalf("a recreated invalid policy inherited its predecessor's entry")
	}
}
