package tenancy

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// TestTenantState: what the Secret's annotations say at a given time: which passwords
// Redis must accept, whether a rotation is due, and when to look again.
func TestTenantState(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newTenantSecret("shop", DefaultSecretName, "ratelimit-ns-shop", "current", now.Add(-time.Hour))
	s.Annotations[AnnotationRetiringHash] = redisacl.HashPassword("previous")
	s.Annotations[AnnotationRetireAfter] = formatTime(now.Add(time.Minute))
	st := readTenantState(s)
	if got := st.hashes(now); !slices.Equal(got, []string{redisacl.HashPassword("current"), redisacl.HashPassword("previous")}) {
		t.Fatalf("hashes during the grace: %v", got)
	}
	if got := st.hashes(now.Add(time.Minute)); !slices.Equal(got, []string{redisacl.HashPassword("current")}) {
		t.Fatalf("hashes once the grace ended: %v", got)
	}
	if d := st.next(now, 0, false); d != time.Minute+requeueSlack {
		t.Fatalf("next during the grace: %s", d)
	}
	for _, c := range []struct {
		rotate, handled string
		period          time.Duration
		want            bool
	}{
		{"", "", 0, false},
		{"a", "", 0, true},
		{"a", "a", 0, false},
		{"b", "a", 0, true},
		{"", "", 2 * time.Hour, false},
		{"", "", time.Hour, true}, // the password is an hour old
	} {
		s.Annotations[AnnotationRotate], s.Annotations[AnnotationRotateHandled] = c.rotate, c.handled
		if got := readTenantState(s).rotationDue(now, c.period); got != c.want {
			t.Errorf("rotate %q handled %q period %s: due %v, want %v", c.rotate, c.handled, c.period, got, c.want)
		}
	}
	delete(s.Annotations, AnnotationRetiringHash)
	if d := readTenantState(s).next(now, 2*time.Hour, false); d != time.Hour+requeueSlack {
		t.Fatalf("next with a 2h period and a 1h-old password: %s", d)
	}
	if d := readTenantState(s).next(now, 0, false); d != 0 {
		t.Fatalf("next with nothing pending: %s, want never", d)
	}
	if d := readTenantState(s).next(now, 0, true); d != requeueSlack {
		t.Fatalf("next when removing with no deadline yet: %s, want at once", d)
	}
}

// TestTenantStateLeaving: a Secret whose namespace left a Redis says which, and the
// user's deletion there is looked at by its deadline, or earlier for a sooner one.
func TestTenantStateLeaving(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := newTenantSecret("shop", DefaultSecretName, "ratelimit-ns-shop", "current", now)
	setBackend(s, "isolated")
	s.Annotations[AnnotationLeftBackend] = "" // the default Redis
	s.Annotations[AnnotationLeftDeleteAfter] = formatTime(now.Add(time.Minute))
	st := readTenantState(s)
	if st.backend != "isolated" || !st.leaving || st.left != "" || !st.leftDeleteAfter.Equal(now.Add(time.Minute)) {
		t.Fatalf("state %+v", st)
	}
	if d := st.next(now, 0, false); d != time.Minute+requeueSlack {
		t.Errorf("next while leaving, nothing else pending: %s", d)
	}
	if d := st.next(now, 30*time.Second, false); d != 30*time.Second+requeueSlack {
		t.Errorf("next with a rotation before the deletion: %s", d)
	}
	if d := st.next(now, time.Hour, false); d != time.Minute+requeueSlack {
		t.Errorf("next with a rotation after the deletion: %s", d)
	}
	forgetLeft(s)
	setBackend(s, "")
	if st := readTenantState(s); st.leaving || st.backend != "" || st.next(now, 0, false) != 0 {
		t.Errorf("after the deletion: %+v", st)
	}
}

// TestTenantStateOldSecret: a Secret without the created annotation counts its password's
// age from its creation; an unparsable time reads as none.
func TestTenantStateOldSecret(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created),
		Annotations: map[string]string{AnnotationRetireAfter: "soon"}}}
	st := readTenantState(s)
	if !st.created.Equal(created) || !st.retireAfter.IsZero() {
		t.Fatalf("state %+v", st)
	}
}

func TestFormatTimeRoundsUp(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 1, time.UTC)
	if got := formatTime(at); got != "2026-01-02T03:04:06Z" {
		t.Fatalf("formatTime(%v) = %s: a deadline must never be early", at, got)
	}
	if got := formatTime(at.Truncate(time.Second)); got != "2026-01-02T03:04:05Z" {
		t.Fatalf("a whole second: %s", got)
	}
}

func TestTenancyOptionsValidate(t *testing.T) {
	nodes := redisacl.ServerNodes(nil)
	for _, c := range []struct {
		o       Options
		wantErr string
	}{
		{Options{Nodes: nodes}, ""},
		{Options{Nodes: nodes, RotationPeriod: 24 * time.Hour}, ""},
		{Options{}, "nodes"},
		{Options{Nodes: nodes, SecretName: "Bad_Name"}, "secret name"},
		{Options{Nodes: nodes, UserPrefix: "a b"}, "user prefix"},
		{Options{Nodes: nodes, Grace: -time.Second}, "grace"},
		{Options{Nodes: nodes, RotationPeriod: time.Minute}, "rotation period"}, // within the 5m grace
		{Options{Nodes: nodes, KeyPrefix: "rl*"}, "key prefix"},
	} {
		err := c.o.Validate()
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%+v refused: %v", c.o, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%+v: %v; want an error naming the %s", c.o, err, c.wantErr)
		}
	}
}
