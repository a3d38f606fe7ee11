package redisclient

import (
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
)

// Tenant is namespace ns's Redis user as the operator builds it in tenancy mode
// (redisacl.TenantUser under the default key layout), with the commands of
// redisacl.TenantCommands (database 0, no EVALSHA), accepting the passwords.
func Tenant(t testing.TB, prefix, ns string, cluster bool, passwords ...string) redisacl.User {
	t.Helper()
	hashes := make([]string, len(passwords))
	for i, p := range passwords {
		hashes[i] = redisacl.HashPassword(p)
	}
	u, err := redisacl.TenantUser(prefix, "", ns, redisacl.TenantCommands(cluster, 0, false), hashes)
	if err != nil {
		t.Fatalf("redisclient: user of %s: %v", ns, err)
	}
	return u
}
