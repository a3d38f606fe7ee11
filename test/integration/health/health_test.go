package health_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/policytest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// ready checks what Ready=True promises: accepted, published, no Stalled, every condition
// for the current generation.
func ready(p *v1alpha1.RateLimitPolicy) error {
	if err := allConditionsCurrent(p); err != nil {
		return err
	}
	if err := hasCondition(p, v1alpha1.ConditionPublished, metav1.ConditionTrue, v1alpha1.ReasonPublished); err != nil {
		return err
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionStalled); c != nil {
		return errors.New(p.Name + ": Stalled present on a Ready policy")
	}
	return hasCondition(p, v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonReady)
}

// TestCurrentWhenReady: a valid policy the controller has not acted on yet is InProgress /
// Progressing (the CRD defaults status.observedGeneration to 0, which kstatus needs to tell
// "not looked at" from "nothing to report"); once it is published it is Current / Healthy.
func TestCurrentWhenReady(t *testing.T) {
	w := newWorld(t)
	w.create(t, policytest.New(w.ns, "valid"))
	w.now(t, "valid", status.InProgressStatus, "Progressing")

	w.start(t)
	w.until(t, "valid", status.CurrentStatus, "Healthy", func(p *v1alpha1.RateLimitPolicy) error {
		if err := ready(p); err != nil {
			return err
		}
		return hasCondition(p, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)
	})
}

// TestInProgressWhilePublishing: with the controller paused, a new generation is
// InProgress / Progressing, and so is the status the controller writes until the snapshot
// holds that generation (Ready=False, PublishPending). Resumed, it is Current / Healthy
// again at the new generation.
func TestInProgressWhilePublishing(t *testing.T) {
	w := newWorld(t)
	m := w.start(t)
	w.create(t, policytest.New(w.ns, "edit"))
	w.until(t, "edit", status.CurrentStatus, "Healthy", ready)

	if err := m.Stop(); err != nil { // nothing writes the status from here on
		t.Fatal(err)
	}
	w.update(t, "edit", func(p *v1alpha1.RateLimitPolicy) { p.Spec.Limits[0].Requests = 20 })
	h := w.now(t, "edit", status.InProgressStatus, "Progressing")
	if !strings.Contains(h.kstatus.Message, "latest observed generation is 1") {
		t.Errorf("kstatus message %q does not name the generation", h.kstatus.Message)
	}

	// What the controller writes for a moment after each change: compiled, not yet in the
	// snapshot. The test writes it itself to hold that moment still.
	p := w.policy(t, "edit")
	p.Status.ObservedGeneration = p.Generation
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ConditionScriptsLoaded, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonScriptsLoaded, Message: "loaded"},
		{Type: v1alpha1.ConditionPublished, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPending, Message: "waiting for the namespace's snapshot to be written"},
		{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPending, Message: "waiting for the namespace's snapshot to be written"},
	} {
		c.ObservedGeneration = p.Generation
		meta.SetStatusCondition(&p.Status.Conditions, c)
	}
	if err := w.e.Client.Status().Update(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	h = w.now(t, "edit", status.InProgressStatus, "Progressing")
	if !strings.HasPrefix(h.argoText, v1alpha1.ReasonPending) {
		t.Errorf("Argo CD message %q, want the PublishPending reason", h.argoText)
	}

	w.start(t)
	got := w.until(t, "edit", status.CurrentStatus, "Healthy", ready)
	if g := got.obj.GetGeneration(); g != 2 {
		t.Errorf("generation %d, want 2", g)
	}
}

// invalidPolicy passes the CRD's schema and CEL rules but not the compiler (the webhook
// would refuse it): two limits share one state key, since the key has no ${limit}.
func invalidPolicy(ns, name string) *v1alpha1.RateLimitPolicy {
	return policytest.New(ns, name, func(p *v1alpha1.RateLimitPolicy) {
		p.Spec.Limits = append(p.Spec.Limits, v1alpha1.Limit{Name: "per-minute", Requests: 100,
			Period: metav1.Duration{Duration: time.Minute}})
		p.Spec.KeyLayout = &v1alpha1.KeyLayout{State: "{rl:${namespace}/${identity}}"}
	})
}

// TestFailedWhenInvalid: a stored policy that does not compile is Stalled, so kstatus says
// Failed (Ready=False alone would only be InProgress) and Argo CD Degraded, both naming the
// field. Fixed, it is Current / Healthy and Stalled is gone.
func TestFailedWhenInvalid(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	w.create(t, invalidPolicy(w.ns, "bad"))
	h := w.until(t, "bad", status.FailedStatus, "Degraded", func(p *v1alpha1.RateLimitPolicy) error {
		if err := allConditionsCurrent(p); err != nil {
			return err
		}
		if err := hasCondition(p, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonInvalidPolicy); err != nil {
			return err
		}
		return hasCondition(p, v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonInvalidPolicy)
	})
	for what, msg := range map[string]string{"kstatus": h.kstatus.Message, "Argo CD": h.argoText} {
		if !strings.Contains(msg, "spec.keyLayout.state") {
			t.Errorf("%s message %q does not name the field", what, msg)
		}
	}

	w.update(t, "bad", func(p *v1alpha1.RateLimitPolicy) { p.Spec.KeyLayout, p.Spec.Limits = nil, p.Spec.Limits[:1] })
	w.until(t, "bad", status.CurrentStatus, "Healthy", ready)
}

// TestRedisOutageKeepsHealth: Redis killed (SIGKILL, by PID) under a Ready policy: the
// policy reports ScriptsLoaded=False (RedisUnavailable) and stays Ready, Current and
// Healthy, with the outage and the failure mode in the Ready message, for as long as the
// outage lasts; a policy created during the outage is published and Healthy too. When
// Redis is back, ScriptsLoaded recovers on its own and the message drops the outage.
func TestRedisOutageKeepsHealth(t *testing.T) {
	w := newWorld(t)
	w.start(t)
	w.create(t, policytest.New(w.ns, "before"))
	w.until(t, "before", status.CurrentStatus, "Healthy", ready)

	w.redis.Kill()
	redisDown := func(p *v1alpha1.RateLimitPolicy) error {
		if err := ready(p); err != nil {
			return err
		}
		if err := hasCondition(p, v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable); err != nil {
			return err
		}
		if msg := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "failure mode FailOpen") {
			return errors.New("Ready message does not tell the outage: " + msg)
		}
		return nil
	}
	h := w.until(t, "before", status.CurrentStatus, "Healthy", redisDown)
	if !strings.Contains(h.argoText, "Redis is unavailable") {
		t.Errorf("Argo CD message %q does not tell the outage", h.argoText)
	}
	// Several script-loader rounds fail meanwhile; nothing flips.
	wait.Consistently(t, 6*resync, "Healthy during the outage", func() error {
		h, err := w.judge(t, "before")
		if err != nil {
			return err
		}
		if err := h.expect(status.CurrentStatus, "Healthy"); err != nil {
			return err
		}
		return redisDown(h.policy)
	})

	w.create(t, policytest.New(w.ns, "during", policytest.Paths("/during"), policytest.FailureMode(v1alpha1.FailureModeFailClosed)))
	w.until(t, "during", status.CurrentStatus, "Healthy", func(p *v1alpha1.RateLimitPolicy) error {
		if err := ready(p); err != nil {
			return err
		}
		if msg := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady).Message; !strings.Contains(msg, "failure mode FailClosed") {
			return errors.New("Ready message does not tell the outage: " + msg)
		}
		return hasCondition(p, v1alpha1.ConditionScriptsLoaded, metav1.ConditionFalse, v1alpha1.ReasonRedisUnavailable)
	})

	w.redis.Restart(t)
	for _, name := range []string{"before", "during"} {
		h := w.until(t, name, status.CurrentStatus, "Healthy", func(p *v1alpha1.RateLimitPolicy) error {
			if err := ready(p); err != nil {
				return err
			}
			return hasCondition(p, v1alpha1.ConditionScriptsLoaded, metav1.ConditionTrue, v1alpha1.ReasonScriptsLoaded)
		})
		if strings.Contains(h.argoText, "Redis") {
			t.Errorf("%s: Argo CD message %q still tells an outage", name, h.argoText)
		}
	}
}
