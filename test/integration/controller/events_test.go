package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/policy"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/kube"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestReadyEvents: a Ready transition emits one event; a re-reconcile that leaves Ready as
// it was emits none; a transition to an invalid spec emits a Warning and back a second
// Ready. A healthy policy never raises a Warning.
func TestReadyEvents(t *testing.T) {
	e, ns := suiteNamespace(t)
	readyPolicy(t, e, ns, "ev")
	waitEvents(t, e, ns, "ev", v1alpha1.ReasonReady, 1)
	checkHealthyEvents(t, e, ns, "ev")
	total := eventTotal(t, e, ns)

	// A re-reconcile (new generation, same compiled policy) keeps Ready as it was.
	writeDefaultLayout(t, e, ns, "ev")
	wait.Consistently(t, 2*time.Second, "no event for a reconcile that keeps Ready", func() error {
		if n := eventTotal(t, e, ns); n != total {
			return fmt.Errorf("%d events, %d before", n, total)
		}
		return nil
	})

	// Ready -> False (invalid) -> True: a Warning, then a second Ready.
	p, err := getPolicy(e, ns, "ev")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.Limits = append(p.Spec.Limits, v1alpha1.Limit{Name: "per-minute", Requests: 100,
		Period: metav1.Duration{Duration: time.Minute}})
	p.Spec.KeyLayout.State = "{rl:${namespace}/${identity}}" // two limits, one key
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, e, ns, "ev", v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy)
	waitEvents(t, e, ns, "ev", v1alpha1.ReasonInvalidPolicy, 1)
	p, err = getPolicy(e, ns, "ev")
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.KeyLayout, p.Spec.Limits = nil, p.Spec.Limits[:1]
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, e, ns, "ev")
	waitEvents(t, e, ns, "ev", v1alpha1.ReasonReady, 2)
	evs, _ := policyEvents(e, ns, "ev")
	for _, ev := range evs {
		if ev.Reason == v1alpha1.ReasonInvalidPolicy && (ev.Type != corev1.EventTypeWarning || !strings.Contains(ev.Note, "spec.keyLayout.state")) {
			t.Errorf("InvalidPolicy event %s %q", ev.Type, ev.Note)
		}
	}
}

// waitEvents waits until the policy has exactly want events with the reason (series
// counted), and checks the count holds for a moment.
func waitEvents(t testing.TB, e *kube.Env, ns, name, reason string, want int32) {
	t.Helper()
	count := func() error {
		evs, err := policyEvents(e, ns, name)
		if err != nil {
			return err
		}
		var n int32
		var seen []string
		for _, ev := range evs {
			seen = append(seen, describe(ev))
			if ev.Reason == reason {
				n += eventCount(ev)
			}
		}
		if n != want {
			return fmt.Errorf("%d %s events, want %d; events: %v", n, reason, want, seen)
		}
		return nil
	}
	wait.Eventually(t, readyTimeout, reason+" events", count)
	wait.Consistently(t, time.Second, reason+" events", count)
}

func describe(ev eventsv1.Event) string {
	return fmt.Sprintf("%s/%s x%d", ev.Type, ev.Reason, eventCount(ev))
}

// checkHealthyEvents checks that a healthy policy's events are Normal, from the controller.
func checkHealthyEvents(t *testing.T, e *kube.Env, ns, name string) {
	t.Helper()
	evs, err := policyEvents(e, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type != corev1.EventTypeNormal || ev.ReportingController == "" || ev.Action != "Reconcile" {
			t.Errorf("event for a healthy policy: %s %s by %q (%s): %s", ev.Type, ev.Reason, ev.ReportingController, ev.Action, ev.Note)
		}
	}
}

// writeDefaultLayout writes the default state key into the policy's spec: a new generation
// that compiles to the same entry. It waits until that generation is reconciled Ready.
func writeDefaultLayout(t *testing.T, e *kube.Env, ns, name string) {
	t.Helper()
	p, err := getPolicy(e, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: (policy.Rules{}).StateKey()}
	if err := e.Client.Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	wait.Eventually(t, readyTimeout, "equivalent edit reconciled", func() error {
		got, err := getPolicy(e, ns, name)
		if err != nil {
			return err
		}
		if got.Status.ObservedGeneration != p.Generation {
			return fmt.Errorf("observedGeneration %d, want %d", got.Status.ObservedGeneration, p.Generation)
		}
		return readyErr(got)
	})
}
