package tenancy

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// The per-namespace credentials Secret: a kubernetes.io/basic-auth Secret (username,
// password) whose annotations hold the rotation state, so a restarted or newly elected
// manager continues a rotation where the last one left it. Nothing here is kept in memory.
const (
	// DefaultSecretName is the Secret the sidecars mount (config/samples).
	DefaultSecretName = "ratelimit-redis-credentials"
	// DefaultUserPrefix begins every per-namespace Redis user: <prefix><namespace>.
	DefaultUserPrefix = "ratelimit-ns-"

	// LabelCredentials marks a Secret the operator writes; it never touches a Secret
	// of that name without it (and app.kubernetes.io/managed-by).
	LabelCredentials = "policy.ratelimit.dev/tenant-credentials"
	// AnnotationRotate asks for a new password: set it to any new value (a timestamp).
	AnnotationRotate = "policy.ratelimit.dev/rotate"
	// AnnotationRotateHandled is the value of AnnotationRotate last acted on.
	AnnotationRotateHandled = "policy.ratelimit.dev/rotate-handled"
	// AnnotationPasswordCreated is when the current password was made (RFC 3339); the
	// rotation period counts from it.
	AnnotationPasswordCreated = "policy.ratelimit.dev/password-created-at"
	// AnnotationRetiringHash is the SHA-256 of the previous password, which Redis accepts
	// until AnnotationRetireAfter so sidecars not yet given the new one keep connecting.
	AnnotationRetiringHash = "policy.ratelimit.dev/retiring-password-sha256"
	// AnnotationRetireAfter is when the previous password is removed from Redis (RFC 3339).
	AnnotationRetireAfter = "policy.ratelimit.dev/retire-after"
	// AnnotationDeleteAfter is when the user and the Secret go, once the namespace has no
	// policy left (RFC 3339): sidecars still enforcing the last snapshot keep Redis until then.
	AnnotationDeleteAfter = "policy.ratelimit.dev/delete-after"
	// AnnotationBackend names the RedisBackend whose Redis holds the user; absent for the
	// manager's default Redis.
	AnnotationBackend = "policy.ratelimit.dev/redis-backend"
	// AnnotationLeftBackend names the Redis the namespace left (empty: the default Redis),
	// which keeps the user until AnnotationLeftDeleteAfter, for the sidecars that still reach
	// it; present only while that lasts.
	AnnotationLeftBackend = "policy.ratelimit.dev/left-redis-backend"
	// AnnotationLeftDeleteAfter is when the user is deleted from the Redis its namespace left
	// (RFC 3339).
	AnnotationLeftDeleteAfter = "policy.ratelimit.dev/left-redis-backend-delete-after"

	// MinPasswordLength is the shortest password accepted from a hand-edited Secret;
	// a shorter one is replaced. Generated passwords are 43 characters.
	MinPasswordLength = 32
)

// tenantState is what a managed credentials Secret says.
type tenantState struct {
	username, password string
	created            time.Time
	retiringHash       string
	retireAfter        time.Time
	rotateWanted       bool // AnnotationRotate differs from AnnotationRotateHandled
	deleteAfter        time.Time
	backend            string    // the RedisBackend holding the user; "" the default Redis
	leaving            bool      // the user is being retired from the Redis named left
	left               string    // that Redis; "" the default one
	leftDeleteAfter    time.Time // when it is deleted there
}

// readTenantState parses the Secret; unparsable times read as zero.
func readTenantState(s *corev1.Secret) tenantState {
	a := s.Annotations
	st := tenantState{
		username:     string(s.Data[corev1.BasicAuthUsernameKey]),
		password:     string(s.Data[corev1.BasicAuthPasswordKey]),
		created:      parseTime(a[AnnotationPasswordCreated]),
		retiringHash: a[AnnotationRetiringHash],
		retireAfter:  parseTime(a[AnnotationRetireAfter]),
		rotateWanted: a[AnnotationRotate] != "" && a[AnnotationRotate] != a[AnnotationRotateHandled],
		deleteAfter:  parseTime(a[AnnotationDeleteAfter]),
		backend:      a[AnnotationBackend],
	}
	st.left, st.leaving = a[AnnotationLeftBackend]
	st.leftDeleteAfter = parseTime(a[AnnotationLeftDeleteAfter])
	if st.created.IsZero() {
		st.created = s.CreationTimestamp.Time
	}
	return st
}

// hashes are the passwords Redis must accept at now: the current one, and the previous
// one until its retirement time.
func (st tenantState) hashes(now time.Time) []string {
	out := []string{redisacl.HashPassword(st.password)}
	if st.retiring(now) {
		out = append(out, st.retiringHash)
	}
	return out
}

// retiring reports whether the previous password is still honoured at now.
func (st tenantState) retiring(now time.Time) bool {
	return st.retiringHash != "" && now.Before(st.retireAfter)
}

// rotationDue reports whether a new password is asked for or the period has run out.
func (st tenantState) rotationDue(now time.Time, period time.Duration) bool {
	return st.rotateWanted || (period > 0 && !now.Before(st.created.Add(period)))
}

// next is how long until the state must be looked at again, 0 for never: the user's
// removal while removing, else the previous password's retirement (a rotation asked for
// meanwhile waits for it), else the next periodic rotation; or the user's deletion from a
// Redis its namespace left, when that comes first.
func (st tenantState) next(now time.Time, period time.Duration, removing bool) time.Duration {
	var at time.Time
	set := true
	switch {
	case removing:
		at = st.deleteAfter
	case st.retiringHash != "":
		at = st.retireAfter
	case period > 0:
		at = st.created.Add(period)
	default:
		set = false
	}
	if st.leaving && (!set || st.leftDeleteAfter.Before(at)) {
		at, set = st.leftDeleteAfter, true
	}
	if !set {
		return 0
	}
	return max(at.Sub(now), 0) + requeueSlack
}

// requeueSlack is added to every deadline so the next look is after it, not just before.
const requeueSlack = 100 * time.Millisecond

// managedSecret reports whether the operator wrote the Secret.
func managedSecret(s *corev1.Secret) bool {
	return s.Labels[LabelCredentials] == "true" && s.Labels[labelManagedBy] == managedByValue
}

// labelManagedBy and managedByValue mark every object the operator writes.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	managedByValue = "ratelimit-operator"
)

// newTenantSecret is a fresh credentials Secret for user with password, made at now.
func newTenantSecret(ns, name, user, password string, now time.Time) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type:       corev1.SecretTypeBasicAuth,
	}
	setTenantCredentials(s, user, password, now)
	return s
}

// setTenantCredentials writes user and password as the current credentials, made at now,
// with the labels; rotation annotations are left to the caller.
func setTenantCredentials(s *corev1.Secret, user, password string, now time.Time) {
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[labelManagedBy] = managedByValue
	s.Labels[LabelCredentials] = "true"
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[AnnotationPasswordCreated] = formatTime(now)
	s.Data = map[string][]byte{
		corev1.BasicAuthUsernameKey: []byte(user),
		corev1.BasicAuthPasswordKey: []byte(password),
	}
	s.StringData = nil
}

// formatTime is t in RFC 3339, rounded up to the second so a deadline is never early.
func formatTime(t time.Time) string {
	if r := t.Truncate(time.Second); r.Before(t) {
		t = r.Add(time.Second)
	}
	return t.UTC().Format(time.RFC3339)
}

func parseTime(v string) time.Time {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}
	}
	return t
}
