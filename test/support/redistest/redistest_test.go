package redistest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// testCtx returns a context that bounds one step of a test.
func testCtx(t *testing.T) context.Context { return wait.Context(t, 10*time.Second) }

// requireGone fails unless the process pid no longer exists and dir was removed.
func requireGone(t *testing.T, pid int, dir string) {
	t.Helper()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d: kill -0 = %v, want ESRCH", pid, err)
	}
	if dir == "" {
		return
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dir %s: stat = %v, want not exist", dir, err)
	}
}

// quickClient returns a client that fails fast instead of retrying.
func quickClient(t *testing.T, s *Server) *redis.Client {
	opts := s.Options()
	opts.MaxRetries, opts.DialTimeout, opts.ReadTimeout = -1, time.Second, time.Second
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestServerSetGet(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	if want := "127.0.0.1:" + strconv.Itoa(s.Port()); s.Addr() != want {
		t.Fatalf("Addr() = %q, want %q", s.Addr(), want)
	}
	if s.PID() <= 0 || !s.Running() {
		t.Fatalf("PID() = %d, Running() = %v", s.PID(), s.Running())
	}
	ctx, c := testCtx(t), s.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want v", got, err)
	}
}

func TestServerKillRestart(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	ctx, c := testCtx(t), quickClient(t, s)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	port, oldPID := s.Port(), s.PID()
	s.Kill()
	if s.Running() {
		t.Fatal("Running() after Kill")
	}
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING succeeded after Kill")
	}
	requireGone(t, oldPID, "")

	s.Restart(t)
	if s.Port() != port || s.PID() == oldPID {
		t.Fatalf("after Restart: port %d (was %d), pid %d (was %d)", s.Port(), port, s.PID(), oldPID)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart = %v, want redis.Nil (no persistence)", err)
	}
}

func TestServerStopEndsProcess(t *testing.T) {
	t.Parallel()
	s := StartServer(t)
	pid := s.PID()
	s.Stop()
	requireGone(t, pid, "")
	s.Stop() // idempotent
	s.Kill()
}

func TestServerCleanup(t *testing.T) {
	t.Parallel()
	var pid int
	var dir string
	t.Run("start", func(t *testing.T) {
		s := StartServer(t)
		pid, dir = s.PID(), s.Dir()
		if err := s.Client().Ping(testCtx(t)).Err(); err != nil {
			t.Fatalf("PING: %v", err)
		}
	})
	requireGone(t, pid, dir)
}

func TestServerOptions(t *testing.T) {
	t.Parallel()
	s := StartServer(t, WithPassword("s3cret"), WithArgs("--maxmemory", "12345678"))
	ctx := testCtx(t)
	got, err := s.Client().ConfigGet(ctx, "maxmemory").Result()
	if err != nil || got["maxmemory"] != "12345678" {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want 12345678", got, err)
	}
	opts := s.Options()
	opts.Password, opts.MaxRetries = "", -1
	anon := redis.NewClient(opts)
	defer anon.Close()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("PING without password = %v, want NOAUTH", err)
	}
}

// shardKeys hash to the three thirds of the slot range: {b} 3300, {c} 7365, {a} 15495.
var shardKeys = []string{"{a}", "{b}", "{c}"}

func TestCluster(t *testing.T) {
	t.Parallel()
	var pids []int
	var dirs []string
	t.Run("three primaries", func(t *testing.T) {
		c := StartCluster(t, 3)
		for _, n := range c.Nodes() {
			pids, dirs = append(pids, n.PID()), append(dirs, n.Dir())
		}
		if len(c.Addrs()) != 3 || len(c.Primaries()) != 3 || len(c.Replicas()) != 0 {
			t.Fatalf("Addrs %v, %d primaries, %d replicas", c.Addrs(), len(c.Primaries()), len(c.Replicas()))
		}
		checkClusterState(t, c)
		checkShards(t, c)
	})
	for i, pid := range pids {
		requireGone(t, pid, dirs[i])
	}
}

// checkClusterState checks that every node reports cluster_state:ok.
func checkClusterState(t *testing.T, c *Cluster) {
	t.Helper()
	for _, n := range c.Nodes() {
		info, err := n.Client().ClusterInfo(testCtx(t)).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			t.Fatalf("%s CLUSTER INFO = %q, %v", n.Addr(), info, err)
		}
	}
}

// checkShards writes one key per shard through a cluster client and reads each back from
// the primary that owns its slot.
func checkShards(t *testing.T, c *Cluster) {
	t.Helper()
	ctx, cc := testCtx(t), c.Client()
	owners := map[string]bool{}
	for _, key := range shardKeys {
		slot := keySlot(t, c, key)
		owner := c.PrimaryForKey(t, key)
		owners[owner.Addr()] = true
		if err := cc.Set(ctx, key, "v"+key, 0).Err(); err != nil {
			t.Fatalf("cluster SET %s: %v", key, err)
		}
		got, err := owner.Client().Get(ctx, key).Result()
		if err != nil || got != "v"+key {
			t.Fatalf("GET %s (slot %d) on owner %s = %q, %v", key, slot, owner.Addr(), got, err)
		}
		if got, err := cc.Get(ctx, key).Result(); err != nil || got != "v"+key {
			t.Fatalf("cluster GET %s = %q, %v", key, got, err)
		}
	}
	if len(owners) != 3 {
		t.Fatalf("keys %v landed on %d primaries, want 3", shardKeys, len(owners))
	}
}

// keySlot returns key's slot, checking that every node computes the same one.
func keySlot(t *testing.T, c *Cluster, key string) int64 {
	t.Helper()
	slot := int64(-1)
	for _, n := range c.Nodes() {
		got, err := n.Client().ClusterKeySlot(testCtx(t), key).Result()
		if err != nil {
			t.Fatalf("%s CLUSTER KEYSLOT %s: %v", n.Addr(), key, err)
		}
		if slot >= 0 && got != slot {
			t.Fatalf("CLUSTER KEYSLOT %s: %s says %d, others %d", key, n.Addr(), got, slot)
		}
		slot = got
	}
	return slot
}

func TestClusterWithReplicas(t *testing.T) {
	t.Parallel()
	c := StartCluster(t, 3, WithReplicas(1))
	if len(c.Nodes()) != 6 || len(c.Replicas()) != 3 {
		t.Fatalf("%d nodes, %d replicas; want 6 and 3", len(c.Nodes()), len(c.Replicas()))
	}
	ctx := testCtx(t)
	for i, r := range c.Replicas() {
		info, err := replicationInfo(r)
		if err != nil {
			t.Fatal(err)
		}
		want := strconv.Itoa(c.Primaries()[i].Port())
		if info["role"] != "slave" || info["master_port"] != want {
			t.Fatalf("%s: role %q master_port %q, want slave of port %s", r.Addr(), info["role"], info["master_port"], want)
		}
	}
	checkClusterState(t, c)
	checkReplicaRead(ctx, t, c, "{a}")
}

// checkReplicaRead writes key through the cluster client and reads it from the replica of
// the primary that owns it.
func checkReplicaRead(ctx context.Context, t *testing.T, c *Cluster, key string) {
	t.Helper()
	if err := c.Client().Set(ctx, key, "replicated", 0).Err(); err != nil {
		t.Fatalf("cluster SET: %v", err)
	}
	owner := c.PrimaryForKey(t, key)
	if n, err := owner.Client().Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 on %s = %d, %v", owner.Addr(), n, err)
	}
	replica := c.Replicas()[primaryIndex(t, c, owner)]
	conn := replica.Client().Conn()
	defer conn.Close()
	if err := conn.ReadOnly(ctx).Err(); err != nil {
		t.Fatalf("READONLY: %v", err)
	}
	if got, err := conn.Get(ctx, key).Result(); err != nil || got != "replicated" {
		t.Fatalf("GET %s on replica %s = %q, %v", key, replica.Addr(), got, err)
	}
}

// primaryIndex returns p's index in c.Primaries().
func primaryIndex(t *testing.T, c *Cluster, p *Server) int {
	t.Helper()
	for i, q := range c.Primaries() {
		if q == p {
			return i
		}
	}
	t.Fatalf("%s is not a primary", p.Addr())
	return -1
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	major, minor, err := parseVersion("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64")
	if err != nil || major != 7 || minor != 0 {
		t.Fatalf("parseVersion = %d.%d, %v; want 7.0", major, minor, err)
	}
	if _, _, err := parseVersion("garbage"); err == nil {
		t.Fatal("parseVersion(garbage) succeeded")
	}
}
