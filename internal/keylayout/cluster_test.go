package keylayout

import (
	"context"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// trickyKeys are concrete keys that exercise every branch of Redis's hash-tag rule.
var trickyKeys = []string{
	"{", "}", "{}", "}{", "{}{a}", "a{b}c{d}", "{{x}}", "{x}}", "a{", "a}", "a{}b", "{a", "a}b{c}",
	"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{user1000}.following", "user1000", "",
	"123456789", "日本{語}", "{é}", "\x00", "{\x00}", "a\x00{b\x00}", "{\r\n}", "\xff{\xfe}",
	strings.Repeat("{", 300), strings.Repeat("x", 70000),
}

// clusterCorpus returns at least n keys: random identities expanded through several
// templates, and trickyKeys.
func clusterCorpus(n int) []string {
	templates := []*Template{
		MustParse(typical),
		MustParse("rl:{${identity}}:${limit}:${slot}"),
		MustParse("rl:${namespace}:${identity}"),
		MustParse("x{}{${identity}}"),
	}
	r := rand.New(rand.NewPCG(5, 6))
	keys := append([]string(nil), trickyKeys...)
	for i := 0; len(keys) < n; i++ {
		v := &Values{Namespace: "ns", Policy: "p", Identity: randomIdentity(r), Limit: "l", Slot: "1"}
		if i%7 == 0 {
			v.Identity = "" // empty tags: Redis hashes the whole key
		}
		keys = append(keys, templates[i%len(templates)].Expand(v))
	}
	return keys
}

// keySlots asks the cluster for CLUSTER KEYSLOT of every key, in one pipeline.
func keySlots(t *testing.T, cc *redis.ClusterClient, keys []string) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmds := make([]*redis.IntCmd, len(keys))
	pipe := cc.Pipeline()
	for i, k := range keys {
		cmds[i] = pipe.ClusterKeySlot(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("pipelined CLUSTER KEYSLOT: %v", err)
	}
	slots := make([]int64, len(keys))
	for i, c := range cmds {
		slots[i] = c.Val()
	}
	return slots
}

func TestSlotMatchesRedisCluster(t *testing.T) {
	redistest.RequireRedis(t)
	cc := redistest.StartCluster(t, 3).Client()

	keys := clusterCorpus(3000)
	for i, server := range keySlots(t, cc, keys) {
		if got := Slot(keys[i]); int64(got) != server {
			t.Errorf("Slot(%.60q) = %d, CLUSTER KEYSLOT = %d", keys[i], got, server)
		}
	}
	t.Logf("%d keys agree with CLUSTER KEYSLOT", len(keys))
}

// TestTemplateKeysShareSlotOnCluster checks on a real cluster that one identity's keys for
// every limit and window slot share a hash slot: the server reports one slot for all of them
// and accepts them together in one multi-key Lua script, which it refuses with CROSSSLOT
// otherwise.
func TestTemplateKeysShareSlotOnCluster(t *testing.T) {
	redistest.RequireRedis(t)
	cc := redistest.StartCluster(t, 3).Client()
	tmpl := MustParse(typical)
	script := redis.NewScript(`for i, k in ipairs(KEYS) do redis.call('INCR', k) end return #KEYS`)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r := rand.New(rand.NewPCG(7, 8))
	for i := range 200 {
		id := randomIdentity(r)
		if i < len(hostileValues) {
			id = hostileValues[i]
		}
		keys := identityKeys(tmpl, id)
		slots := keySlots(t, cc, keys)
		for j, s := range slots {
			if s != slots[0] || int64(Slot(keys[j])) != s {
				t.Fatalf("identity %.40q: key %q on server slot %d (ours %d), first key on %d",
					id, keys[j], s, Slot(keys[j]), slots[0])
			}
		}
		if n, err := script.Run(ctx, cc, keys).Int(); err != nil || n != len(keys) {
			t.Fatalf("identity %.40q: multi-key script over %q = %d, %v", id, keys, n, err)
		}
	}
}

// identityKeys returns the keys of one identity for several limits and both window slots.
func identityKeys(tmpl *Template, identity string) []string {
	var keys []string
	for _, limit := range []string{"per-second", "per-minute", "burst"} {
		for _, slot := range []string{"0", "1"} {
			v := &Values{Namespace: "team-a", Policy: "api", Identity: identity, Limit: limit, Slot: slot}
			keys = append(keys, tmpl.Expand(v))
		}
	}
	return keys
}
