package redisclient

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// Tenant is namespace ns's Redis user as the operator builds it in tenancy mode: named
// prefix+ns, its keys those of ns under the default key layout (redisacl.KeyPattern), the
// commands of redisacl.TenantCommands (database 0, no EVALSHA), accepting the passwords.
func Tenant(t testing.TB, prefix, ns string, cluster bool, passwords ...string) redisacl.User {
	t.Helper()
	pattern, err := redisacl.KeyPattern("", ns)
	if err != nil {
		t.Fatalf("redisclient: key pattern of %s: %v", ns, err)
	}
	u := redisacl.User{Name: prefix + ns, KeyPatterns: []string{pattern}, Commands: redisacl.TenantCommands(cluster, 0, false)}
	for _, p := range passwords {
		u.PasswordHashes = append(u.PasswordHashes, redisacl.HashPassword(p))
	}
	return u
}
