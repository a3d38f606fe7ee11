package v1alpha1_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scheme"
	webhookv1alpha1 "github.com/ratelimit-dev/ratelimit-operator/internal/webhook/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
)

const (
	defaultState = "{rl:${namespace}/${policy}:${identity}}:${limit}"
	otherTagIdem = "{idem:${namespace}/${policy}:${identity}}:${requestId}"
)

// base is a valid, warning-free policy (TokenBucket 10/s, burst 20: horizon 2s).
func base() *policyv1alpha1.RateLimitPolicy {
	return policytest.New("shop", "api-per-key", policytest.TypeMeta, policytest.Burst(20),
		policytest.FailureMode(policyv1alpha1.FailureModeFailOpen))
}

func defaulted(p *policyv1alpha1.RateLimitPolicy) *policyv1alpha1.RateLimitPolicy {
	if err := (&webhookv1alpha1.Defaulter{}).Default(context.Background(), p); err != nil {
		panic(err)
	}
	return p
}

func withIdem(p *policyv1alpha1.RateLimitPolicy, idemKey string) *policyv1alpha1.RateLimitPolicy {
	p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
	p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{Idempotency: idemKey}
	return p
}

func onLogin(p *policyv1alpha1.RateLimitPolicy) *policyv1alpha1.RateLimitPolicy {
	p.Spec.Match.HTTP[0].PathPrefixes = []string{"/login"}
	return p
}

func TestDefaulterFillsLayoutAndTTL(t *testing.T) {
	p := base()
	p.Spec.Idempotency = &policyv1alpha1.Idempotency{TTL: metav1.Duration{Duration: time.Minute}}
	if err := (&webhookv1alpha1.Defaulter{}).Default(context.Background(), p); err != nil {
		t.Fatalf("Default: %v", err)
	}
	kl := p.Spec.KeyLayout
	if kl == nil || kl.State != defaultState || kl.Idempotency != "{rl:${namespace}/${policy}:${identity}}:idem:${requestId}" ||
		kl.TTL == nil || kl.TTL.Duration != 2*time.Second {
		t.Fatalf("defaulted layout %+v, want state %q, idempotency on the same tag, ttl 2s", kl, defaultState)
	}
}

func TestDefaulterKeepsUserFieldsAndIsIdempotent(t *testing.T) {
	p := base()
	p.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{t:${identity}}:${limit}", TTL: &metav1.Duration{Duration: time.Hour}}
	want := p.DeepCopy()
	d := &webhookv1alpha1.Defaulter{}
	for range 2 {
		if err := d.Default(context.Background(), p); err != nil {
			t.Fatalf("Default: %v", err)
		}
		if !equality.Semantic.DeepEqual(p, want) {
			t.Fatalf("Default changed a fully specified policy: %+v", p.Spec.KeyLayout)
		}
	}
}

// invalid is a policy the validator must refuse, with the cause it must carry.
type invalid struct {
	name  string
	p     *policyv1alpha1.RateLimitPolicy
	field string
	msg   string
}

func invalidCases() []invalid {
	noTTL := base()
	noTTL.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: defaultState}
	short := base()
	short.Spec.KeyLayout = &policyv1alpha1.KeyLayout{TTL: &metav1.Duration{Duration: time.Second}}
	badTmpl := base()
	badTmpl.Spec.KeyLayout = &policyv1alpha1.KeyLayout{State: "{rl:${user}}:${limit}"}
	localCap := base()
	localCap.Spec.FailureMode = policyv1alpha1.FailureModeLocalCap
	fast := base()
	fast.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	fast.Spec.Limits[0].Requests, fast.Spec.Limits[0].Period.Duration, fast.Spec.Limits[0].Burst = 2000, time.Millisecond, nil
	idemSlots := withIdem(base(), "")
	idemSlots.Spec.Concurrency = &policyv1alpha1.Concurrency{Max: 3}
	return []invalid{
		{"concurrency with idempotency", defaulted(idemSlots), "spec.concurrency", "cannot be combined with idempotency"},
		{"idempotency key on another tag", defaulted(withIdem(base(), otherTagIdem)),
			"spec.keyLayout.idempotency", "hash to slots 3256 and 408"},
		{"no TTL (not defaulted)", noTTL, "spec.keyLayout.ttl", "Required value: a TTL is required"},
		{"TTL below the horizon", defaulted(short), "spec.keyLayout.ttl", "use at least 2s"},
		{"unknown template variable", defaulted(badTmpl), "spec.keyLayout.state", `unknown variable "user"`},
		{"LocalCap without its cap", defaulted(localCap), "spec.localCap", "failureMode LocalCap needs localCap"},
		{"GCRA above one request per microsecond", defaulted(fast), "spec.limits[0].requests", "more than one request per microsecond"},
	}
}

// assertInvalid checks that err is an apierrors Invalid for the policy with a cause on field.
func assertInvalid(t *testing.T, err error, name, field, msg string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want an Invalid error, got %T %v", err, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("not an APIStatus: %v", err)
	}
	d := status.Status().Details
	if d == nil || d.Group != policyv1alpha1.GroupVersion.Group || d.Kind != "RateLimitPolicy" || d.Name != name {
		t.Fatalf("details %+v do not name RateLimitPolicy %q", d, name)
	}
	for _, c := range d.Causes {
		if c.Field == field && strings.Contains(c.Message, msg) {
			if !strings.Contains(err.Error(), field) {
				t.Errorf("error message does not name %s: %v", field, err)
			}
			return
		}
	}
	t.Fatalf("no cause on %q containing %q; causes %+v", field, msg, d.Causes)
}

func TestValidateCreateRejects(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	for _, tc := range invalidCases() {
		t.Run(tc.name, func(t *testing.T) {
			w, err := v.ValidateCreate(context.Background(), tc.p)
			assertInvalid(t, err, tc.p.Name, tc.field, tc.msg)
			if len(w) != 0 {
				t.Errorf("unexpected warnings %q", w)
			}
		})
	}
}

func TestValidateCreateAcceptsDefaultedPolicies(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	for name, p := range map[string]*policyv1alpha1.RateLimitPolicy{
		"base":        base(),
		"idempotency": withIdem(base(), ""),
		"FailClosed on /login": func() *policyv1alpha1.RateLimitPolicy {
			p := onLogin(base())
			p.Spec.FailureMode = policyv1alpha1.FailureModeFailClosed
			return p
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			w, err := v.ValidateCreate(context.Background(), defaulted(p))
			if err != nil || len(w) != 0 {
				t.Fatalf("want accepted without warnings, got warnings %q, error %v", w, err)
			}
		})
	}
}

func TestValidateCreateWarnsWhenValid(t *testing.T) {
	w, err := (&webhookv1alpha1.Validator{}).ValidateCreate(context.Background(), defaulted(onLogin(base())))
	if err != nil {
		t.Fatalf("refused a valid policy: %v", err)
	}
	if len(w) != 1 || !strings.Contains(w[0], `FailOpen admits every request to "/login"`) {
		t.Fatalf("want the FailOpen warning, got %q", w)
	}
}

func TestValidateCreateWarnsWhenInvalid(t *testing.T) {
	p := defaulted(onLogin(withIdem(base(), otherTagIdem)))
	w, err := (&webhookv1alpha1.Validator{}).ValidateCreate(context.Background(), p)
	assertInvalid(t, err, p.Name, "spec.keyLayout.idempotency", "every key of a call must share one tag")
	if len(w) != 1 || !strings.Contains(w[0], "spec.failureMode: FailOpen") {
		t.Fatalf("warnings must come back with the error; got %q", w)
	}
}

func TestValidateUpdate(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	old := defaulted(base())

	gcra := old.DeepCopy()
	gcra.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	w, err := v.ValidateUpdate(context.Background(), old, gcra)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "spec.algorithm: changing TokenBucket to GCRA") {
		t.Errorf("algorithm change: want accepted with one warning, got %q, %v", w, err)
	}

	relayout := old.DeepCopy()
	relayout.Spec.KeyLayout.State = "{rl:${namespace}/v2:${identity}}:${limit}"
	w, err = v.ValidateUpdate(context.Background(), old, relayout)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], `spec.keyLayout: changing the state key from "`+defaultState+`" to "{rl:${namespace}/v2:${identity}}:${limit}"`) {
		t.Errorf("layout change: want accepted with one warning, got %q, %v", w, err)
	}

	more := old.DeepCopy()
	more.Spec.Limits[0].Requests = 20
	if w, err := v.ValidateUpdate(context.Background(), old, more); err != nil || len(w) != 0 {
		t.Errorf("unrelated change: want accepted silently, got %q, %v", w, err)
	}

	broken := old.DeepCopy()
	broken.Spec.Algorithm = policyv1alpha1.AlgorithmSlidingWindow
	broken.Spec.Limits[0].Burst = nil
	broken.Spec.KeyLayout.State = "{rl:${identity}x}:${limit}"
	w, err = v.ValidateUpdate(context.Background(), old, broken)
	assertInvalid(t, err, old.Name, "spec.keyLayout.state", "must be followed by")
	if len(w) == 0 || !strings.Contains(w[0], "changing TokenBucket to SlidingWindow") {
		t.Errorf("refused update must still warn about the algorithm change, got %q", w)
	}
}

func TestValidateDeleteAlwaysAllowed(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	for _, tc := range invalidCases() {
		if w, err := v.ValidateDelete(context.Background(), tc.p); err != nil || w != nil {
			t.Errorf("%s: delete refused or warned: %q, %v", tc.name, w, err)
		}
	}
}

// TestWebhookChainAgreesWithPolicy: ValidateCreate reports exactly the field errors of
// policy.Rules.CompileAsIs, in order, as the causes of its Invalid error.
func TestWebhookChainAgreesWithPolicy(t *testing.T) {
	v := &webhookv1alpha1.Validator{}
	for _, tc := range invalidCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, errs := (policy.Rules{}).CompileAsIs(tc.p.DeepCopy())
			_, err := v.ValidateCreate(context.Background(), tc.p)
			var status apierrors.APIStatus
			if !errors.As(err, &status) || len(status.Status().Details.Causes) != len(errs) {
				t.Fatalf("webhook causes differ from policy.Rules.CompileAsIs errors: %v vs %v", err, errs)
			}
			for i, c := range status.Status().Details.Causes {
				if c.Field != errs[i].Field {
					t.Errorf("cause %d on %s, Compile says %s", i, c.Field, errs[i].Field)
				}
			}
		})
	}
}

// admissionRequest wraps p as the API server sends it.
func admissionRequest(t *testing.T, op admissionv1.Operation, p, old *policyv1alpha1.RateLimitPolicy) admission.Request {
	t.Helper()
	raw := func(o *policyv1alpha1.RateLimitPolicy) runtime.RawExtension {
		if o == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Group: "policy.ratelimit.dev", Version: "v1alpha1", Kind: "RateLimitPolicy"},
		Resource:  metav1.GroupVersionResource{Group: "policy.ratelimit.dev", Version: "v1alpha1", Resource: "ratelimitpolicies"},
		Name:      p.Name,
		Namespace: p.Namespace,
		Operation: op,
		Object:    raw(p),
		OldObject: raw(old),
	}}
}

// TestMutatingHandlerPatchesLayout drives the Defaulter through controller-runtime's admission
// handler, as the webhook server does: the answer is a JSON patch adding spec.keyLayout.
func TestMutatingHandlerPatchesLayout(t *testing.T) {
	mutate := admission.WithDefaulter(scheme.New(), &webhookv1alpha1.Defaulter{})
	resp := mutate.Handle(context.Background(), admissionRequest(t, admissionv1.Create, base(), nil))
	if !resp.Allowed || len(resp.Patches) == 0 {
		t.Fatalf("defaulting: want allowed with patches, got %+v", resp)
	}
	for _, op := range resp.Patches {
		if op.Path == "/spec/keyLayout" {
			return
		}
	}
	t.Errorf("no patch adds /spec/keyLayout: %+v", resp.Patches)
}

// TestValidatingHandlerDeniesWithCausesAndWarnings: through the admission handler a refusal is
// a 422 Invalid status with causes, and still carries the warnings.
func TestValidatingHandlerDeniesWithCausesAndWarnings(t *testing.T) {
	validate := admission.WithValidator(scheme.New(), &webhookv1alpha1.Validator{})
	bad := defaulted(onLogin(withIdem(base(), otherTagIdem)))
	resp := validate.Handle(context.Background(), admissionRequest(t, admissionv1.Create, bad, nil))
	r := resp.Result
	if resp.Allowed || r == nil || r.Code != http.StatusUnprocessableEntity || r.Reason != metav1.StatusReasonInvalid ||
		r.Details == nil || len(r.Details.Causes) == 0 || r.Details.Causes[0].Field != "spec.keyLayout.idempotency" {
		t.Fatalf("want a 422 Invalid with a cause on spec.keyLayout.idempotency, got %+v", r)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "FailOpen") {
		t.Errorf("denied response lost the warnings: %q", resp.Warnings)
	}
}

// TestValidatingHandlerUpdateWarns: an admitted update answers with the change warning.
func TestValidatingHandlerUpdateWarns(t *testing.T) {
	validate := admission.WithValidator(scheme.New(), &webhookv1alpha1.Validator{})
	old := defaulted(base())
	upd := old.DeepCopy()
	upd.Spec.Algorithm = policyv1alpha1.AlgorithmGCRA
	resp := validate.Handle(context.Background(), admissionRequest(t, admissionv1.Update, upd, old))
	if !resp.Allowed || len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "changing TokenBucket to GCRA") {
		t.Errorf("want allowed with the algorithm warning, got allowed=%v warnings %q", resp.Allowed, resp.Warnings)
	}
}
