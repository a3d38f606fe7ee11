package redismemory_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts/loader"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/limitercheck"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redisclient"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

const (
	blobs     = 16        // large values the tenant writes without a TTL
	blobBytes = 256 << 10 // each
	// tolerance is how far the sampled sizes may be from a full MEMORY USAGE sum taken
	// after the cycle: the data does not change, so only SCAN's duplicates while a
	// dictionary rehashes could make them differ.
	tolerance = 0.01
)

// protectedArgs keep counters and bound memory.
var protectedArgs = redistest.LimiterMemory("256mb", "10%")

// TestForeignKeysNameTheTenant: a tenant (its namespace's user, as the operator creates it)
// writing large values without a TTL in its own scope is named as the namespace with
// foreign keys, their size estimated within tolerance of a full MEMORY USAGE sum; the
// limiter's own keys (every kind: state, idempotency, leases) of another namespace are
// never foreign; keys outside every scope count as OtherNamespace. Standalone.
func TestForeignKeysNameTheTenant(t *testing.T) {
	t.Parallel()
	srv := server(t, protectedArgs...)
	addrs := []string{srv.Addr()}
	foreignKeys(t, redisconn.ModeStandalone, addrs, []*redistest.Server{srv}, 1)
}

// TestForeignKeysOnCluster is TestForeignKeysNameTheTenant on a 3-primary Cluster with a
// replica each: every primary is sampled, no replica (which would count its primary's
// keys twice), and every node is checked.
func TestForeignKeysOnCluster(t *testing.T) {
	t.Parallel()
	redistest.RequireRedis(t)
	c := redistest.StartCluster(t, 3, redistest.WithReplicas(1),
		redistest.WithNodeOptions(withUsers(t), redistest.WithArgs(protectedArgs...)))
	foreignKeys(t, redisconn.ModeCluster, c.Addrs(), c.Primaries(), len(c.Nodes()))
}

// foreignKeys runs the tenant scenario on the deployment at addrs, whose primaries are
// given, and that has nodes nodes.
func foreignKeys(t *testing.T, mode redisconn.Mode, addrs []string, primaries []*redistest.Server, nodes int) {
	ctx := testCtx(t)
	admin, all := connect(t, mode, addrs, adminUser, adminPassword)
	users := &redisacl.Users{Nodes: all, Prefix: tenantPrefix}
	shop := tenantClient(ctx, t, users, mode, addrs, "shop")
	bank := tenantClient(ctx, t, users, mode, addrs, "bank")
	// As the manager runs tenancy: the scripts loaded as functions, which shop's sidecar calls.
	if err := (&loader.ScriptLoader{Client: admin, Functions: true, Log: logr.Discard()}).Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if errs := (limitercheck.Sidecar{NS: "shop", Mode: limiter.FailClosed, Functions: true}).All(ctx, shop); len(errs) > 0 {
		t.Fatalf("the limiter as shop: %v", errors.Join(errs...))
	}
	writeBlobs(ctx, t, bank)
	if mode == redisconn.ModeStandalone { // an application's key beside the limiter's
		if err := primaries[0].Client().Set(ctx, "app:cache", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}

	m := monitor(t, all, 50)
	r := fullCycle(ctx, t, m)
	if len(r.Nodes) != nodes || len(r.Cycles) != len(primaries) {
		t.Errorf("%d nodes checked, %d sampled; want %d and the %d primaries", len(r.Nodes), len(r.Cycles), nodes, len(primaries))
	}
	t.Logf("bank %+v, shop %+v, other %+v", r.Namespaces["bank"], r.Namespaces["shop"], r.Namespaces[redismemory.OtherNamespace])
	checkBank(ctx, t, r.Namespaces["bank"], primaries)
	if s := r.Namespaces["shop"]; s.Keys == 0 || s.ForeignKeys != 0 {
		t.Errorf("shop (the limiter's keys only): %+v; want keys, none foreign", s)
	}
	if mode == redisconn.ModeStandalone && r.Namespaces[redismemory.OtherNamespace].Keys != 1 {
		t.Errorf("keys outside every scope: %+v; want app:cache", r.Namespaces[redismemory.OtherNamespace])
	}
	checkAssessments(t, m, r)
}

// writeBlobs has bank write blobs values without a TTL in its scope, and one with a TTL.
func writeBlobs(ctx context.Context, t *testing.T, bank redis.UniversalClient) {
	t.Helper()
	for i := range blobs {
		if err := bank.Set(ctx, fmt.Sprintf("{rl:bank/blob-%d}", i), strings.Repeat("x", blobBytes), 0).Err(); err != nil {
			t.Fatalf("bank SET without TTL: %v", err)
		}
	}
	if err := bank.Set(ctx, "{rl:bank/with-ttl}", strings.Repeat("y", blobBytes), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
}

// checkBank compares bank's sampled usage with a full MEMORY USAGE sum of its keys.
func checkBank(ctx context.Context, t *testing.T, b redismemory.Usage, primaries []*redistest.Server) {
	t.Helper()
	foreign, all := scopeSum(ctx, t, primaries, "{rl:bank/*")
	if b.ForeignKeys != blobs || b.Keys != blobs+1 {
		t.Errorf("bank: %d foreign keys of %d; want %d of %d", b.ForeignKeys, b.Keys, blobs, blobs+1)
	}
	within(t, "bank's foreign bytes", b.ForeignBytes, foreign)
	within(t, "bank's bytes", b.Bytes, all)
	if b.ForeignBytes < blobs*blobBytes {
		t.Errorf("bank's foreign bytes %d, less than the %d written", b.ForeignBytes, blobs*blobBytes)
	}
}

// checkAssessments: bank's policies are told of its foreign keys, shop's are protected, and
// bank's connections are counted.
func checkAssessments(t *testing.T, m *redismemory.Monitor, r *redismemory.Report) {
	t.Helper()
	if a := m.Assess("bank"); a.State != redismemory.Exposed || a.Reason != string(redismemory.ForeignKeys) ||
		!strings.Contains(a.Message, "namespace bank's scope") {
		t.Errorf("bank's assessment %+v; want Exposed, ForeignKeys, naming bank", a)
	}
	if a := m.Assess("shop"); a.State != redismemory.Protected {
		t.Errorf("shop's assessment %+v; want Protected", a)
	}
	if conns := tenantConnections(r, "bank"); conns.Connections == 0 || conns.Memory == 0 {
		t.Errorf("bank's connections %+v; want its client's", conns)
	}
}

// tenantClient creates namespace ns's user, as the operator does, and connects as it.
func tenantClient(ctx context.Context, t *testing.T, users *redisacl.Users, mode redisconn.Mode, addrs []string, ns string) redis.UniversalClient {
	t.Helper()
	password := ns + "-pa55"
	user := redisclient.Tenant(t, tenantPrefix, ns, mode == redisconn.ModeCluster, password)
	if err := users.Ensure(ctx, user); err != nil {
		t.Fatal(err)
	}
	c, _ := connect(t, mode, addrs, user.Name, password)
	return c
}

// scopeSum is the MEMORY USAGE of every key matching pattern on the primaries, read as the
// default user with a full SCAN: of those without a TTL, and of all.
func scopeSum(ctx context.Context, t *testing.T, primaries []*redistest.Server, pattern string) (noTTL, all int64) {
	t.Helper()
	for _, p := range primaries {
		c := p.Client()
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			n, err := c.MemoryUsage(ctx, iter.Val()).Result()
			if err != nil {
				t.Fatal(err)
			}
			all += n
			if ttl, err := c.Do(ctx, "PTTL", iter.Val()).Int64(); err != nil {
				t.Fatal(err)
			} else if ttl == -1 {
				noTTL += n
			}
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return noTTL, all
}

// within fails unless got is within tolerance of want.
func within(t *testing.T, what string, got, want int64) {
	t.Helper()
	if want == 0 || math.Abs(float64(got-want))/float64(want) > tolerance {
		t.Errorf("%s: sampled %d, a full MEMORY USAGE sum %d: more than %.0f%% apart", what, got, want, tolerance*100)
	}
}

// tenantConnections sums namespace ns's connections over the report's nodes.
func tenantConnections(r *redismemory.Report, ns string) redismemory.Clients {
	var sum redismemory.Clients
	for _, n := range r.Nodes {
		sum.Connections += n.Clients[ns].Connections
		sum.Memory += n.Clients[ns].Memory
	}
	return sum
}
