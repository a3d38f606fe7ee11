package webhook

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/keylayout"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
)

// crossTag gives p an idempotency key on another hash tag than the (defaulted) state key.
func crossTag(p *policyv1alpha1.RateLimitPolicy) {
	p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: 10 * time.Minute}}
	p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{Idempotency: otherTagIdem}
}

// crossTagSlots are the slots the webhook must name for crossTag: the idempotency key's and
// the state key's, for the sample identity "alice" and request id "req-1".
func crossTagSlots(ns, name string) (idem, state string) {
	i := keylayout.Slot(fmt.Sprintf("{idem:%s/%s:alice}:req-1", ns, name))
	s := keylayout.Slot(fmt.Sprintf("{rl:%s/%s:alice}:per-second", ns, name))
	return strconv.Itoa(int(i)), strconv.Itoa(int(s))
}

// TestCreateRejectedWithWebhookMessage: what the schema lets through but the limiter cannot
// run is refused by the validating webhook, and the client sees its message and causes.
func TestCreateRejectedWithWebhookMessage(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, _ := kube.NewWarningClient(t, e)

	t.Run("cross-tag layout names both templates and slots", func(t *testing.T) {
		p := basePolicy(ns, "cross-tag")
		crossTag(p)
		err := c.Create(context.Background(), p)
		idemSlot, stateSlot := crossTagSlots(ns, p.Name)
		if idemSlot == stateSlot {
			t.Fatalf("test needs distinct slots, got %s twice", idemSlot)
		}
		assertCause(t, err, "spec.keyLayout.idempotency", otherTagIdem, defaultState,
			fmt.Sprintf("hash to slots %s and %s", idemSlot, stateSlot))
		assertNotFound(t, c, ns, p.Name)
	})

	cases := []struct {
		name   string
		mutate func(p *policyv1alpha1.RateLimitPolicy)
		field  string
		frags  []string
	}{
		{"identity running into text", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:${identity}x}:${limit}"}
		}, "spec.keyLayout.state", []string{"must be followed by"}},
		{"TTL below the horizon", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{TTL: &metav1.Duration{Duration: time.Second}}
		}, "spec.keyLayout.ttl", []string{"shorter than the TokenBucket horizon 2s", "use at least 2s"}},
		{"unknown template variable", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:${user}}:${limit}"}
		}, "spec.keyLayout.state", []string{`unknown variable "user"`}},
		{"identity not delimited", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:${identity}-x}:${limit}"}
		}, "spec.keyLayout.state", []string{"${identity} must be followed by ':' or '}'"}},
		{"empty hash tag", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{}:rl:${identity}:${limit}"}
		}, "spec.keyLayout.state", []string{"empty hash tag {}"}},
		{"period with a fraction of a millisecond", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Limits[0].Period.Duration = 1900 * time.Microsecond
			p.Spec.Limits[0].Burst = nil
		}, "spec.limits[0].period", []string{"1.9ms is not a whole number of milliseconds"}},
		{"hash tag that is empty for the Shared caller", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{${identity}}:${limit}"}
		}, "spec.keyLayout.state", []string{"expands to the empty tag {}"}},
		{"keys of another namespace", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:victim/payments:${identity}}:${limit}"}
		}, "spec.keyLayout.state", []string{`must begin with "{rl:${namespace}/"`, "another namespace's keys"}},
		{"an application's own keys", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "app:session:${identity}"}
		}, "spec.keyLayout.state", []string{`must begin with "{rl:${namespace}/"`}},
		{"a constant key", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:global}:${limit}"}
		}, "spec.keyLayout.state", []string{`must begin with "{rl:${namespace}/"`}},
		{"GCRA faster than one request per microsecond", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
			p.Spec.Limits[0].Requests, p.Spec.Limits[0].Period.Duration, p.Spec.Limits[0].Burst = 2000, time.Millisecond, nil
		}, "spec.limits[0].requests", []string{"more than one request per microsecond"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := basePolicy(ns, fmt.Sprintf("bad-%d", i))
			tc.mutate(p)
			assertCause(t, c.Create(context.Background(), p), tc.field, tc.frags...)
			assertNotFound(t, c, ns, p.Name)
		})
	}
}

// TestUpdateBreakingLayoutRefused: an update the limiter cannot run is refused and the stored
// object stays exactly as it was.
func TestUpdateBreakingLayoutRefused(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, _ := kube.NewWarningClient(t, e)
	p := basePolicy(ns, "stable")
	stored := createStored(t, c, p)
	breaks := []struct {
		name   string
		mutate func(p *policyv1alpha1.RateLimitPolicy)
		field  string
		frag   string
	}{
		{"idempotency on another tag", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
			p.Spec.KeyLayout.Idempotency = otherTagIdem
		}, "spec.keyLayout.idempotency", "every key of a call must share one tag"},
		{"second limit without ${limit}", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Limits = append(p.Spec.Limits, policyv1alpha1.Limit{Name: "per-minute", Requests: 100,
				Period: metav1.Duration{Duration: time.Minute}})
			p.Spec.KeyLayout.State = "{rl:${identity}}"
			p.Spec.KeyLayout.TTL.Duration = time.Minute
		}, "spec.keyLayout.state", "must use ${limit}"},
		{"longer period than a user-written TTL covers", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Limits[0].Period.Duration = time.Hour
			p.Spec.KeyLayout.TTL.Duration = 90 * time.Minute
		}, "spec.keyLayout.ttl", "use at least 2h0m0s"},
	}
	for _, b := range breaks {
		t.Run(b.name, func(t *testing.T) {
			upd := stored.DeepCopy()
			b.mutate(upd)
			assertCause(t, c.Update(context.Background(), upd), b.field, b.frag)
			var now policyv1alpha1.RateLimitPolicy
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &now); err != nil {
				t.Fatalf("get: %v", err)
			}
			if now.ResourceVersion != stored.ResourceVersion || !equality.Semantic.DeepEqual(now.Spec, stored.Spec) {
				t.Fatalf("refused update changed the stored object:\nbefore %+v\nafter  %+v", stored.Spec, now.Spec)
			}
		})
	}
}

// TestDefaultedTTLFollowsPeriod: a TTL the webhook chose (the user never wrote one, as in a
// GitOps manifest) follows a longer period on update instead of blocking it.
func TestDefaultedTTLFollowsPeriod(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, _ := kube.NewWarningClient(t, e)
	stored := createStored(t, c, basePolicy(ns, "follows"))
	before := stored.Spec.KeyLayout.TTL.Duration
	stored.Spec.Limits[0].Period.Duration = time.Hour
	if err := c.Update(context.Background(), stored); err != nil {
		t.Fatalf("a longer period with a defaulted TTL was refused: %v", err)
	}
	if got := stored.Spec.KeyLayout.TTL.Duration; got <= before || got < time.Hour {
		t.Fatalf("defaulted TTL %s after the period became 1h (was %s); want it to cover the new horizon", got, before)
	}
}

// TestWarningsReachClient: the validating webhook's warnings arrive as Warning headers, on
// accepted creates and updates, and alongside a refusal.
func TestWarningsReachClient(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, warnings := kube.NewWarningClient(t, e)
	// write creates p (or updates it), which the API server must accept, and returns the
	// warnings it drew.
	write := func(what string, p *policyv1alpha1.RateLimitPolicy, create bool) []string {
		t.Helper()
		var err error
		if create {
			err = c.Create(context.Background(), p)
		} else {
			err = c.Update(context.Background(), p)
		}
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return warnings.Take()
	}

	quiet := basePolicy(ns, "quiet")
	if w := write("create", quiet, true); len(w) != 0 {
		t.Errorf("a warning-free policy drew warnings: %q", w)
	}

	login := basePolicy(ns, "login")
	login.Spec.Match.HTTP[0].PathPrefixes = []string{"/login"}
	kube.AssertWarning(t, write("create FailOpen on /login", login, true), "spec.failureMode:", `FailOpen admits every request to "/login"`)

	quiet.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	w := write("update algorithm", quiet, false)
	kube.AssertWarning(t, w, "spec.algorithm: changing TokenBucket to GCRA", "orphans the live counters")
	if len(w) != 1 {
		t.Errorf("want only the algorithm warning, got %q", w)
	}

	quiet.Spec.Limits[0].Requests = 20
	if w := write("unrelated update", quiet, false); len(w) != 0 {
		t.Errorf("an unrelated update drew warnings: %q", w)
	}

	bad := basePolicy(ns, "bad-login")
	bad.Spec.Match.HTTP[0].PathPrefixes = []string{"/login"}
	crossTag(bad)
	assertCause(t, c.Create(context.Background(), bad), "spec.keyLayout.idempotency", "one Cluster slot")
	kube.AssertWarning(t, warnings.Take(), `FailOpen admits every request to "/login"`)
}

// TestHotKeysThroughWebhook: turning leases on draws the warning that names the trade-off;
// shards on a per-caller identity are refused with the rule's message; a sharded global
// limit (Fixed identity) is admitted with its warning.
func TestHotKeysThroughWebhook(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, warnings := kube.NewWarningClient(t, e)

	leased := basePolicy(ns, "leased")
	leased.Spec.HotKeys = &policyv1alpha1.HotKeys{Leases: policyv1alpha1.LeaseModeOn}
	if err := c.Create(context.Background(), leased); err != nil {
		t.Fatalf("create with leases: %v", err)
	}
	kube.AssertWarning(t, warnings.Take(), "spec.hotKeys.leases: On", "under-admission")

	perCaller := basePolicy(ns, "per-caller-shards")
	perCaller.Spec.HotKeys = &policyv1alpha1.HotKeys{Shards: ptr.To[int32](3)}
	assertCause(t, c.Create(context.Background(), perCaller), "spec.hotKeys.shards", "every identity source must be Fixed")

	global := basePolicy(ns, "global")
	global.Spec.Identity.Sources = []policyv1alpha1.IdentitySource{{Type: policyv1alpha1.IdentityFixed, Fixed: &policyv1alpha1.FixedSource{Value: "all"}}}
	global.Spec.HotKeys = &policyv1alpha1.HotKeys{Shards: ptr.To[int32](3)}
	if err := c.Create(context.Background(), global); err != nil {
		t.Fatalf("create a sharded global limit: %v", err)
	}
	kube.AssertWarning(t, warnings.Take(), "spec.hotKeys.shards: 3 shards")

	// A settlement consumes its reservation and changes the counters in one call: a sharded
	// limit's counters live on several hash tags, so it cannot settle.
	settled := global.DeepCopy()
	settled.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "global-settled"}
	settled.Spec.Cost = &policyv1alpha1.Cost{Default: 1, Settle: &policyv1alpha1.CostSettle{Header: "X-Tokens"}}
	assertCause(t, c.Create(context.Background(), settled), "spec.cost.settle", "cannot be combined with hotKeys.shards")
}

// TestDefaultsStored: the mutating webhook's layout and TTL are stored, and what the user set
// is kept.
func TestDefaultsStored(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, _ := kube.NewWarningClient(t, e)
	cases := []struct {
		name       string
		mutate     func(p *policyv1alpha1.RateLimitPolicy)
		state, idm string
		ttl        string // as stored in JSON
	}{
		{"TokenBucket", func(*policyv1alpha1.RateLimitPolicy) {}, defaultState, "", "2s"},
		{"SlidingWindow with two limits", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Algorithm, p.Spec.Limits[0].Burst = policyv1alpha1.AlgorithmSlidingWindow, nil
			p.Spec.Limits = append(p.Spec.Limits, policyv1alpha1.Limit{Name: "per-hour", Requests: 1000,
				Period: metav1.Duration{Duration: time.Hour}})
		}, defaultState, "", "2h0m0s"},
		{"idempotency shares the custom state tag", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:${namespace}/t:${identity}}:${limit}"}
		}, "{rl:${namespace}/t:${identity}}:${limit}", "{rl:${namespace}/t:${identity}}:idem:${requestId}", "2s"},
		{"idempotency with the default layout", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
		}, defaultState, defaultIdem, "2s"},
		{"user TTL kept", func(p *policyv1alpha1.RateLimitPolicy) {
			p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{TTL: &metav1.Duration{Duration: time.Hour}}
		}, defaultState, "", "1h0m0s"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := basePolicy(ns, fmt.Sprintf("defaults-%d", i))
			tc.mutate(p)
			if err := c.Create(context.Background(), p); err != nil {
				t.Fatalf("create: %v", err)
			}
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(policyv1alpha1.GroupVersion.WithKind("RateLimitPolicy"))
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), u); err != nil {
				t.Fatalf("get: %v", err)
			}
			for path, want := range map[string]string{"state": tc.state, "idempotency": tc.idm, "ttl": tc.ttl} {
				got, _, _ := unstructured.NestedString(u.Object, "spec", "keyLayout", path)
				if got != want {
					t.Errorf("stored spec.keyLayout.%s = %q, want %q", path, got, want)
				}
			}
		})
	}
}

// TestServerSideDryRun: a dry run gets the same refusals, defaults and warnings, and stores
// nothing.
func TestServerSideDryRun(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, warnings := kube.NewWarningClient(t, e)

	bad := basePolicy(ns, "dry-bad")
	crossTag(bad)
	idemSlot, stateSlot := crossTagSlots(ns, bad.Name)
	assertCause(t, c.Create(context.Background(), bad, client.DryRunAll), "spec.keyLayout.idempotency",
		fmt.Sprintf("hash to slots %s and %s", idemSlot, stateSlot))
	assertNotFound(t, c, ns, bad.Name)

	good := basePolicy(ns, "dry-good")
	good.Spec.Match.HTTP[0].PathPrefixes = []string{"/payments"}
	if err := c.Create(context.Background(), good, client.DryRunAll); err != nil {
		t.Fatalf("dry-run create: %v", err)
	}
	if kl := good.Spec.KeyLayout; kl == nil || kl.State != defaultState || kl.TTL == nil || kl.TTL.Duration != 2*time.Second {
		t.Errorf("dry-run answer not defaulted: %+v", kl)
	}
	kube.AssertWarning(t, warnings.Take(), `FailOpen admits every request to "/payments"`)
	assertNotFound(t, c, ns, good.Name)
	var all policyv1alpha1.RateLimitPolicyList
	if err := c.List(context.Background(), &all, client.InNamespace(ns)); err != nil || len(all.Items) != 0 {
		t.Fatalf("dry run stored something: %d items, err %v", len(all.Items), err)
	}

	stored := basePolicy(ns, "dry-update")
	if err := c.Create(context.Background(), stored); err != nil {
		t.Fatalf("create: %v", err)
	}
	before := stored.DeepCopy()
	upd := stored.DeepCopy()
	upd.Spec.KeyLayout.State = "{rl:${identity}}:${requestId}"
	assertCause(t, c.Update(context.Background(), upd, client.DryRunAll), "spec.keyLayout.state", `variable "requestId"`, "not allowed here")
	upd = stored.DeepCopy()
	upd.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	if err := c.Update(context.Background(), upd, client.DryRunAll); err != nil {
		t.Fatalf("dry-run update: %v", err)
	}
	kube.AssertWarning(t, warnings.Take(), "spec.algorithm: changing TokenBucket to GCRA")
	var now policyv1alpha1.RateLimitPolicy
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), &now); err != nil {
		t.Fatalf("get: %v", err)
	}
	if now.ResourceVersion != before.ResourceVersion || !equality.Semantic.DeepEqual(now.Spec, before.Spec) {
		t.Fatalf("dry-run updates changed the stored object: %+v", now.Spec)
	}
}

// TestSamplesAcceptedThroughWebhook: every sample passes both webhooks without a warning and
// is stored with a complete layout that compiles.
func TestSamplesAcceptedThroughWebhook(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, warnings := kube.NewWarningClient(t, e)
	for _, path := range kube.SamplePaths(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			obj := kube.ReadObject(t, path)
			obj.SetNamespace(ns)
			if err := c.Create(context.Background(), obj); err != nil {
				t.Fatalf("refused sample %s: %v", path, err)
			}
			if w := warnings.Take(); len(w) != 0 {
				t.Errorf("sample drew warnings: %q", w)
			}
			var got policyv1alpha1.RateLimitPolicy
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), &got); err != nil {
				t.Fatalf("get: %v", err)
			}
			if kl := got.Spec.KeyLayout; kl == nil || kl.State == "" || kl.TTL == nil ||
				(got.Spec.Idempotency != nil) != (kl.Idempotency != "") {
				t.Fatalf("stored layout incomplete: %+v", kl)
			}
			if _, errs := (policy.Rules{}).CompileAsIs(&got); len(errs) > 0 {
				t.Fatalf("stored sample does not compile: %v", errs.ToAggregate())
			}
		})
	}
}

// TestUndecodableDurationNamesField: a duration Go cannot parse (`1y`) is refused on its
// field, by the first webhook that sees it (the mutating one, which runs before the schema),
// instead of a decoding error that names no field. Every duration field of the API is
// listed: a tier's period, the slot TTL and the settle timeout were once missed. So is a
// value of the wrong JSON type (a string where an integer goes), once a bare decoding error.
func TestUndecodableDurationNamesField(t *testing.T) {
	e := suite.Env(t)
	ns := kube.NewNamespace(t, e, "wh-")
	c, _ := kube.NewWarningClient(t, e)
	for path, value := range map[string]any{
		"spec.limits[0].period":          "1y",
		"spec.keyLayout.ttl":             "forever-ish",
		"spec.idempotency.ttl":           float64(60),
		"spec.tiers[0].limits[0].period": "1 minute",
		"spec.concurrency.slotTTL":       "1d",
		"spec.cost.settle.timeout":       "soon",
		"spec.limits[0].requests":        "twenty",
		"spec.tiers[0].limits[0].burst":  float64(1 << 63),
	} {
		t.Run(path, func(t *testing.T) {
			p := basePolicy(ns, "bad-duration")
			p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
			u := toUnstructured(t, p)
			setPath(u.Object, path, value)
			err := c.Create(context.Background(), u)
			frag := "duration"
			if _, number := value.(float64); strings.HasSuffix(path, "requests") || strings.HasSuffix(path, "burst") && number {
				frag = "integer"
			}
			assertFieldCause(t, err, path, frag)
			assertNotFound(t, c, ns, p.Name)
		})
	}
}

// setPath sets value at path ("spec.a[0].b"), making the objects and one-item lists on the
// way that are missing.
func setPath(obj map[string]any, path string, value any) {
	parts := strings.Split(path, ".")
	for i, part := range parts {
		name, indexed := strings.CutSuffix(part, "[0]")
		if i == len(parts)-1 {
			obj[name] = value
			return
		}
		if !indexed {
			next, ok := obj[name].(map[string]any)
			if !ok {
				next = map[string]any{}
				obj[name] = next
			}
			obj = next
			continue
		}
		list, _ := obj[name].([]any)
		if len(list) == 0 {
			list = []any{map[string]any{}}
			obj[name] = list
		}
		obj = list[0].(map[string]any)
	}
}

// toUnstructured converts a typed policy for edits the typed form cannot hold.
func toUnstructured(t *testing.T, p *policyv1alpha1.RateLimitPolicy) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(policyv1alpha1.GroupVersion.String())
	u.SetKind("RateLimitPolicy")
	return u
}

// assertFieldCause checks that err is Invalid with a cause on field whose message holds frag,
// whichever admission step refused it.
func assertFieldCause(t *testing.T, err error, field, frag string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error on %s, got %v", field, err)
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) && status.Status().Details != nil {
		for _, c := range status.Status().Details.Causes {
			if c.Field == field && strings.Contains(c.Message, frag) {
				return
			}
		}
	}
	t.Fatalf("no cause on %q containing %q; got %v", field, frag, err)
}
