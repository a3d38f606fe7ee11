package adversarial

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisacl"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/internal/redismemory"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpcheck"
	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/httpserver"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redisclient"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Class: tenants share Redis memory (issue 25, item 3). Redis has no per-user memory quota:
// namespace bank's own credentials may SET large values without a TTL inside bank's scope.
// With maxmemory-policy allkeys-lru, the issue saw 2,000 of 2,000 exhausted identities of
// another namespace admitted again, their counters evicted; with volatile-lru, every check
// of that namespace decided by its failure mode (OOM). Redis cannot prevent it, so the
// manager must say so: its memory monitor reads every node's settings and reports
// CountersEvictable, and names bank as the namespace holding keys without a TTL. With
// noeviction, no exhausted identity is admitted: Redis answers OOM and FailClosed decides.
const (
	exhaustedIDs = 2000                  // shop's identities, each at its limit
	fillValue    = 64 << 10              // bytes of each value bank writes
	fillTotal    = 2 * memoryLimit       // bytes bank writes in all
	memoryLimit  = 8 << 20               // the server's maxmemory
	adminUser    = "ratelimit-admin"     // config/redis/acl.conf's administrative user
	adminPass    = "admin-pa55-eviction" // its password here
	tenantPrefix = "ratelimit-ns-"       // the manager's default user prefix
)

// TestEvictableCountersReadmitAndAreReported: allkeys-lru evicts shop's counters while bank
// fills the memory, and shop's exhausted identities are admitted again; the monitor reports
// CountersEvictable for shop's policies and names bank's foreign keys.
func TestEvictableCountersReadmitAndAreReported(t *testing.T) {
	s := newSharedRedis(t, "allkeys-lru")
	s.exhaust()
	s.fill()
	admitted, sources := s.recheck()
	t.Logf("allkeys-lru: %d of %d exhausted identities admitted again (decided by %v); %s keys evicted",
		admitted, exhaustedIDs, sources, s.evicted())
	if admitted == 0 {
		t.Errorf("no exhausted identity admitted after bank filled the memory: the eviction this class is about did not happen")
	}
	a := s.assess("shop")
	if a.State != redismemory.Exposed || a.Reason != string(redismemory.CountersEvictable) ||
		!strings.Contains(a.Message, "maxmemory-policy allkeys-lru on "+s.srv.Addr()) {
		t.Errorf("shop's assessment %+v; want Exposed, CountersEvictable, naming the node's allkeys-lru", a)
	}
	s.checkBankNamed()
}

// TestNoEvictionNeverReadmits: with noeviction, bank's fill ends in OOM and not one of
// shop's exhausted identities is admitted again. New identities are admitted while their
// counters fit, and once Redis is full one is decided by FailClosed on OOM, never admitted.
// The monitor reports shop's counters protected and names bank's foreign keys.
func TestNoEvictionNeverReadmits(t *testing.T) {
	s := newSharedRedis(t, "noeviction")
	s.exhaust()
	if refused := s.fill(); refused == 0 {
		t.Fatalf("bank wrote %d bytes into %d of maxmemory without an OOM", fillTotal, memoryLimit)
	}
	fits, full := s.untilFull()
	t.Logf("noeviction: %d new identities admitted before Redis was full; then %s decided (%v)", fits, full.Decision.Source, full.Decision.Err)
	if full.Allowed || full.Decision.Source != limiter.SourceFailClosed || !strings.Contains(fmt.Sprint(full.Decision.Err), "OOM") {
		t.Errorf("a new identity on a full Redis: allowed %v by %s (%v); want denied by FailClosed on OOM",
			full.Allowed, full.Decision.Source, full.Decision.Err)
	}
	admitted, sources := s.recheck()
	t.Logf("noeviction: %d of %d exhausted identities admitted again (decided by %v)", admitted, exhaustedIDs, sources)
	if admitted > 0 {
		t.Errorf("%d exhausted identities admitted again with noeviction", admitted)
	}
	if a := s.assess("shop"); a.State != redismemory.Protected {
		t.Errorf("shop's assessment %+v; want Protected", a)
	}
	s.checkBankNamed()
}

// maxNewIdentities bounds untilFull: each admission stores a counter of about 100 bytes,
// and the fill leaves less room than a 64 KiB value.
const maxNewIdentities = 10_000

// untilFull checks new identities of shop until one is not decided by Redis (the counters
// of those admitted take the last room), and returns how many were admitted before, and
// that outcome.
func (s *sharedRedis) untilFull() (int, engine.Outcome) {
	s.t.Helper()
	for i := range maxNewIdentities {
		o := s.decide(fmt.Sprintf("new-%05d", i))
		if o.Decision.Source != limiter.SourceRedis || !o.Allowed {
			return i, o
		}
	}
	s.t.Fatalf("%d new identities admitted into a full Redis", maxNewIdentities)
	return 0, engine.Outcome{}
}

// sharedRedis is one redis-server shared by namespace shop (a sidecar's engine, its policy
// allowing one request an hour per identity, failing closed) and namespace bank (its own
// Redis user, as the manager creates it), watched by the manager's memory monitor.
type sharedRedis struct {
	t       *testing.T
	ctx     context.Context
	srv     *redistest.Server
	shop    *rig
	bank    redis.UniversalClient
	monitor *redismemory.Monitor
	written int64 // bytes bank wrote
}

func newSharedRedis(t *testing.T, policy string) *sharedRedis {
	t.Helper()
	srv := redistest.StartServer(t, redistest.WithACLConf(t, "../../config/redis/acl.conf",
		map[string]redistest.ACLUser{adminUser: {Password: adminPass}}),
		redistest.WithArgs(append(redistest.LimiterMemory(fmt.Sprint(memoryLimit), "1mb"), "--maxmemory-policy", policy)...))
	s := &sharedRedis{t: t, ctx: wait.Context(t, 2*time.Minute), srv: srv,
		shop: newRigAt(t, srv, limiter.Options{}, httpserver.DefaultLimits(), newPolicy("orders", v1alpha1.AlgorithmFixedWindow, 1, time.Hour))}
	_, nodes := connectAs(t, srv, adminUser, adminPass)
	users := &redisacl.Users{Nodes: nodes, Prefix: tenantPrefix}
	const bankPass = "bank-pa55"
	if err := users.Ensure(s.ctx, redisclient.Tenant(t, tenantPrefix, "bank", false, bankPass)); err != nil {
		t.Fatal(err)
	}
	s.bank, _ = connectAs(t, srv, tenantPrefix+"bank", bankPass)
	s.monitor = &redismemory.Monitor{Nodes: nodes, ScanCount: redismemory.DefaultScanCount, TenantUserPrefix: tenantPrefix}
	return s
}

// connectAs reaches srv as user, as the manager and the sidecars build their clients.
func connectAs(t *testing.T, srv *redistest.Server, user, pass string) (redis.UniversalClient, redisacl.Nodes) {
	t.Helper()
	return redisclient.As(t, redisconn.ModeStandalone, []string{srv.Addr()}, user, pass)
}

// decide is one check of shop's policy for identity, through the sidecar's engine.
func (s *sharedRedis) decide(identity string) engine.Outcome {
	return s.shop.engine.Decide(s.ctx, httpcheck.FrontName, s.shop.store.Current().Rule("orders"),
		engine.Check{Identity: identity, HasIdentity: true, Cost: 1})
}

// exhaust spends the one request of each of shop's identities: admitted, then denied,
// both by Redis.
func (s *sharedRedis) exhaust() {
	s.t.Helper()
	for i := range exhaustedIDs {
		first, second := s.decide(id(i)), s.decide(id(i))
		if !first.Allowed || second.Allowed || second.Decision.Source != limiter.SourceRedis {
			s.t.Fatalf("identity %d: admitted %v then %v (by %s); want admitted, then denied by Redis",
				i, first.Allowed, second.Allowed, second.Decision.Source)
		}
	}
}

func id(i int) string { return fmt.Sprintf("caller-%04d", i) }

// fill has bank write fillTotal bytes of values without a TTL into its own scope, and
// returns how many writes Redis refused (OOM). Once a value is refused it goes on with
// ever smaller ones, as a determined tenant would, until Redis refuses even a tiny one: a
// refused large write frees its arguments, leaving room for small writes (the limiter's).
func (s *sharedRedis) fill() (refused int) {
	s.t.Helper()
	n := 0
	for _, size := range []int{fillValue, 4 << 10, 256, 16} {
		value := strings.Repeat("x", size)
		for range fillTotal / fillValue {
			err := s.bank.Set(s.ctx, fmt.Sprintf("{rl:bank/blob-%d}", n), value, 0).Err()
			n++
			if err != nil && strings.HasPrefix(err.Error(), "OOM") {
				refused++
				break
			}
			if err != nil {
				s.t.Fatalf("bank's SET in its own scope: %v", err)
			}
			s.written += int64(size)
		}
		if refused == 0 {
			return 0 // nothing refused the large values: the policy evicts
		}
	}
	return refused
}

// recheck checks every exhausted identity once more: how many were admitted, and who
// decided.
func (s *sharedRedis) recheck() (admitted int, sources map[limiter.Source]int) {
	sources = map[limiter.Source]int{}
	for i := range exhaustedIDs {
		o := s.decide(id(i))
		sources[o.Decision.Source]++
		if o.Allowed {
			admitted++
		}
	}
	return admitted, sources
}

// evicted is the server's evicted_keys.
func (s *sharedRedis) evicted() string {
	info, err := s.srv.Client().Info(s.ctx, "stats").Result()
	if err != nil {
		s.t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "evicted_keys:"); ok {
			return v
		}
	}
	return "?"
}

// assess runs the monitor until it has read the settings and completed a sampling cycle
// begun after bank's fill, and returns its assessment of namespace ns.
func (s *sharedRedis) assess(ns string) redismemory.Assessment {
	s.t.Helper()
	s.monitor.Round(s.ctx, true)
	addr := s.srv.Addr()
	base := s.monitor.Report().Cycles[addr]
	for range 10_000 {
		if s.monitor.Report().Cycles[addr] >= base+2 {
			return s.monitor.Assess(ns)
		}
		s.monitor.Round(s.ctx, false)
	}
	s.t.Fatalf("the monitor completed no sampling cycle: %+v", s.monitor.Report())
	return redismemory.Assessment{}
}

// checkBankNamed: the report names bank as the namespace holding keys without a TTL, with
// at least the bytes it still holds of what it wrote, and says so in bank's assessment.
func (s *sharedRedis) checkBankNamed() {
	s.t.Helper()
	a := s.assess("bank")
	u := s.monitor.Report().Namespaces["bank"]
	s.t.Logf("bank: %+v (wrote %d bytes); its assessment: %s", u, s.written, a.Reason)
	if u.ForeignKeys == 0 || u.ForeignBytes < fillValue {
		s.t.Errorf("bank's keys without a TTL: %+v; want its values found and sized", u)
	}
	if !strings.Contains(a.Message, "namespace bank's scope") {
		s.t.Errorf("bank's assessment %+v does not name its keys without a TTL", a)
	}
	if shop := s.monitor.Report().Namespaces["shop"]; shop.ForeignKeys != 0 {
		s.t.Errorf("shop's keys (the limiter's only) %+v: none is without a TTL", shop)
	}
}
