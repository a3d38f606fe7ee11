package adversarial

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/api/v1alpha1"
	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
)

// Issue 25: what a tenant holding only its own sidecar's Redis credentials can do to the
// other tenants of a shared Redis (the tenant rig, tenants_rig_test.go). shop is the
// victim, with its sidecar enforcing a policy; the attacker uses its credentials directly.

// victimChecks is how many checks of the victim each case asks after an attack.
const victimChecks = 30

// requireVictimDecidedByRedis fails unless every one of shop's next checks is decided by
// Redis: nothing the attacker did stalled, filled or refused Redis for it.
func requireVictimDecidedByRedis(t *testing.T, r *rig, after string) {
	t.Helper()
	if got := r.byRedis(t, "api", "alice", victimChecks); got != victimChecks {
		t.Fatalf("after %s: %d of shop's %d checks were decided by Redis; the rest by the failure mode", after, got, victimChecks)
	}
}

// attackCtx bounds one attacking command: a stalled server must not stall the test.
func attackCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// newAttack is the tenant rig with shop's sidecar enforcing a roomy policy (decided by
// Redis before the attack) and the attacker's client.
func newAttack(t *testing.T) (*tenants, *rig, redis.UniversalClient) {
	t.Helper()
	ts := newTenants(t, ns, attackerNS)
	r := ts.sidecar(newPolicy("api", v1alpha1.AlgorithmFixedWindow, 1000, time.Hour))
	requireVictimDecidedByRedis(t, r, "nothing")
	return ts, r, ts.of(attackerNS)
}

// noperm fails unless err is Redis's ACL refusal.
func noperm(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("%s with the attacker's credentials: %v; want NOPERM", what, err)
	}
}

// Item 1: with a namespace's credentials, EVAL of a script that writes and never ends
// stalled Redis for every tenant (0 of 193 checks of another namespace decided by Redis,
// SCRIPT KILL answering UNKILLABLE). A namespace's user may now run no code of its choosing:
// EVAL, EVALSHA, SCRIPT LOAD and FUNCTION LOAD are refused, so no such script can start.
func TestTenantCannotStallRedisWithAScript(t *testing.T) {
	_, r, attacker := newAttack(t)
	loop := "redis.call('SET', KEYS[1], '1') while true do end"
	own := []string{"{rl:" + attackerNS + "/x}"}
	noperm(t, "EVAL of a script that never ends", attacker.Eval(attackCtx(t), loop, own).Err())
	noperm(t, "SCRIPT LOAD", attacker.ScriptLoad(attackCtx(t), loop).Err())
	noperm(t, "FUNCTION LOAD", attacker.FunctionLoad(attackCtx(t),
		"#!lua name=pwn\nredis.register_function('pwn', function(KEYS) "+loop+" end)").Err())
	requireVictimDecidedByRedis(t, r, "the attacker's script")
}

// Item 1: the same grant let a tenant fill the EVAL script cache (12,000 distinct 8 KiB
// bodies took used_memory_scripts_eval to 124 MB past a 64 MB maxmemory, never refused, and
// another namespace's next check got OOM). Now no body reaches the cache.
func TestTenantCannotFillTheScriptCache(t *testing.T) {
	ts, r, attacker := newAttack(t)
	before := scriptMemory(t, ts)
	pad := strings.Repeat("x", 8<<10)
	for i := range 500 {
		if err := attacker.Eval(attackCtx(t), "return '"+pad+strconv.Itoa(i)+"'", nil).Err(); err == nil {
			t.Fatalf("EVAL of body %d was run", i)
		}
	}
	if grew := scriptMemory(t, ts) - before; grew > 64<<10 {
		t.Fatalf("500 bodies of 8 KiB grew the script cache by %d bytes", grew)
	}
	requireVictimDecidedByRedis(t, r, "filling the script cache")
}

// scriptMemory is used_memory_scripts_eval, read as the harness's default user.
func scriptMemory(t *testing.T, ts *tenants) int64 {
	return memoryField(t, ts, "used_memory_scripts_eval")
}

// memoryField is a number of INFO memory, read as the harness's default user.
func memoryField(t *testing.T, ts *tenants, field string) int64 {
	t.Helper()
	info, err := ts.srv.Client().Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("INFO memory has no %s:\n%s", field, info)
	return 0
}

// Item 2, through what a tenant may call: the limiter's own functions, given shapes they
// were not written for (a hundred thousand limits), are refused before any loop, and
// the victim keeps being decided by Redis.
func TestTenantCannotMakeTheLimitersFunctionsLoop(t *testing.T) {
	_, r, attacker := newAttack(t)
	for _, s := range limiter.AllScripts() {
		const limits = 100000
		args := []any{"FCALL", s.Function, "2", "{rl:" + attackerNS + "/x}:a", "{rl:" + attackerNS + "/x}:b", "5", "60000", "2", "-1", "f", "4"}
		for range limits {
			args = append(args, "10", "60000000")
		}
		err := attacker.Do(attackCtx(t), args...).Err()
		if err == nil || !strings.Contains(err.Error(), "ratelimit: refused") {
			t.Errorf("%s with %d limits: %v; want the function's refusal", s.Name, limits, err)
		}
	}
	requireVictimDecidedByRedis(t, r, "hostile shapes")
}

// Done-when of issue 25: every command family a namespace's user is granted (with every
// optional grant: Cluster's CLUSTER SLOTS and COMMAND, SELECT), tried the way an attacker
// would, neither blocks Redis, grows memory outside the attacker's keys, nor touches the
// victim's keys; the victim keeps being decided by Redis after each.
func TestTenantsGrantedCommandsStayInTheirLane(t *testing.T) {
	ts, r, attacker := newAttack(t)
	requireVictimDecidedByRedis(t, r, "nothing")
	victimKey := "{rl:" + ns + "/api:alice}:limit"
	own := "{rl:" + attackerNS + "/x}:a"
	fn := limiter.Scripts()[0].Function
	for _, step := range []struct {
		name string
		run  func(ctx context.Context) error
		want func(error) error
	}{
		{"MGET of the victim's key", func(ctx context.Context) error { return attacker.MGet(ctx, own, victimKey).Err() }, wantNOPERM},
		{"SET of the victim's key", func(ctx context.Context) error { return attacker.Set(ctx, victimKey, "0", 0).Err() }, wantNOPERM},
		{"FCALL on the victim's key", func(ctx context.Context) error {
			return attacker.Do(ctx, "FCALL", fn, "1", victimKey, "1000", "60000", "0", "1", "1000").Err()
		}, wantNOPERM},
		{"FCALL_RO of a writing function", func(ctx context.Context) error {
			return attacker.Do(ctx, "FCALL_RO", fn, "1", own, "1", "60000", "0", "1", "1000").Err()
		}, wantWriteRefused},
		{"FCALL_RO of a peek on the victim's key", func(ctx context.Context) error {
			return attacker.Do(ctx, "FCALL_RO", limiter.PeekScripts()[0].Function, "1", victimKey, "1", "60000", "0", "1", "1000").Err()
		}, wantNOPERM},
		{"FCALL of a grant on the victim's key", func(ctx context.Context) error {
			return attacker.Do(ctx, "FCALL", limiter.AdjustScripts()[0].Function, "2", victimKey, victimKey+":adjust:x",
				"1000000", "60000", "60000", strings.Repeat("f", 16), "grant", "1", "1000").Err()
		}, wantNOPERM},
		{"MGET of 20 000 keys", func(ctx context.Context) error { return attacker.MGet(ctx, manyKeys(20000)...).Err() }, anyAnswer},
		{"PING of 16 MiB (its query and reply buffers)", func(ctx context.Context) error {
			return attacker.Do(ctx, "PING", strings.Repeat("p", 16<<20)).Err()
		}, anyAnswer},
		{"MGET of a 1 MiB value 256 times", func(ctx context.Context) error {
			if err := attacker.Set(ctx, own, strings.Repeat("v", 1<<20), time.Minute).Err(); err != nil {
				return err
			}
			keys := make([]string, 256)
			for i := range keys {
				keys[i] = own
			}
			return attacker.MGet(ctx, keys...).Err()
		}, anyAnswer},
		{"SET of a 2 MiB value", func(ctx context.Context) error {
			return attacker.Set(ctx, own, strings.Repeat("v", 2<<20), time.Minute).Err()
		}, wantRefused},
		{"the limiter's function on a key holding 1 MiB, 64 times", func(ctx context.Context) error {
			if err := attacker.Set(ctx, own, strings.Repeat("7", 1<<20), time.Minute).Err(); err != nil {
				return err
			}
			for range 64 {
				if err := attacker.Do(ctx, "FCALL", fn, "1", own, "1", "60000", "0", "1", "1000").Err(); err != nil {
					return err
				}
			}
			return nil
		}, wantNil},
		{"WAIT for a replica that does not exist, forever", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return attacker.Do(ctx, "WAIT", "1", "0").Err()
		}, anyAnswer},
		{"ROLE", func(ctx context.Context) error { return attacker.Do(ctx, "ROLE").Err() }, wantNil},
		{"COMMAND DOCS, 20 times", func(ctx context.Context) error {
			for range 20 {
				if err := attacker.Do(ctx, "COMMAND", "DOCS").Err(); err != nil {
					return err
				}
			}
			return nil
		}, wantNil},
		{"COMMAND GETKEYS of an MGET of 20 000 keys", func(ctx context.Context) error {
			args := []any{"COMMAND", "GETKEYS", "MGET"}
			for _, k := range manyKeys(20000) {
				args = append(args, k)
			}
			return attacker.Do(ctx, args...).Err()
		}, wantNil},
		{"CLUSTER SLOTS", func(ctx context.Context) error { return attacker.Do(ctx, "CLUSTER", "SLOTS").Err() }, anyAnswer},
		{"SELECT of another database, and a write there", func(ctx context.Context) error {
			c := attacker.(*redis.Client).Conn() //nolint:forcetypeassert // standalone
			defer func() { _ = c.Close() }()
			if err := c.Select(ctx, 1).Err(); err != nil {
				return err
			}
			return c.Set(ctx, victimKey, "0", 0).Err()
		}, wantNOPERM},
		{"TIME", func(ctx context.Context) error { return attacker.Time(ctx).Err() }, wantNil},
	} {
		if err := step.want(step.run(attackCtx(t))); err != nil {
			t.Errorf("%s: %v", step.name, err)
		}
		// maxmemory-clients is 8 MiB: past it Redis evicts the client holding the most.
		if held := clientMemory(t, ts); held > 9<<20 {
			t.Errorf("%s: Redis holds %d bytes for clients afterwards, past maxmemory-clients", step.name, held)
		}
		requireVictimDecidedByRedis(t, r, step.name)
	}
	// A command's own cost grows with its size (20 000 keys: a few ms); what must not happen
	// is a short command running long: a reply of 256 MiB built (client-output-buffer-limit
	// cuts it at 32 MiB), a huge value copied into Lua (proto-max-bulk-len keeps values to
	// 1 MiB), a loop.
	requireNoSlowCommand(t, ts, 500*time.Millisecond)
	if v, err := ts.srv.Client().Get(context.Background(), victimKey).Result(); !errors.Is(err, redis.Nil) && v == "0" {
		t.Fatalf("the victim's key holds the attacker's value")
	}
}

func wantNOPERM(err error) error {
	if err == nil {
		return errors.New("allowed; want NOPERM")
	}
	if !strings.Contains(err.Error(), "NOPERM") {
		return fmt.Errorf("got %w; want NOPERM", err)
	}
	return nil
}

func wantNil(err error) error { return err }

// wantWriteRefused wants the refusal of FCALL_RO (granted for peeks) to run a function that
// may write.
func wantWriteRefused(err error) error {
	if err == nil || !strings.Contains(err.Error(), "write flag") {
		return fmt.Errorf("got %w; want refused for the function's writes", err)
	}
	return nil
}

// wantRefused wants any error: the server refused the command (here, a value longer than
// proto-max-bulk-len, which ends the connection).
func wantRefused(err error) error {
	if err == nil {
		return errors.New("accepted; want refused")
	}
	return nil
}

// anyAnswer accepts any outcome: the step is judged by what it leaves behind.
func anyAnswer(error) error { return nil }

// manyKeys are n keys of the attacker's namespace.
func manyKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "{rl:" + attackerNS + "/x}:" + strconv.Itoa(i)
	}
	return out
}

// clientMemory is mem_clients_normal of INFO memory: what Redis holds for clients' buffers.
func clientMemory(t *testing.T, ts *tenants) int64 { return memoryField(t, ts, "mem_clients_normal") }

// requireNoSlowCommand fails when SLOWLOG holds a command that ran longer than limit: one
// that held Redis's single thread, and so every tenant, that long.
func requireNoSlowCommand(t *testing.T, ts *tenants, limit time.Duration) {
	t.Helper()
	logs, err := ts.srv.Client().SlowLogGet(context.Background(), 128).Result()
	if err != nil {
		t.Fatal(err)
	}
	var slowest time.Duration
	var what []string
	for _, l := range logs {
		if l.Duration > slowest {
			slowest, what = l.Duration, l.Args[:min(len(l.Args), 3)]
		}
		if l.Duration > limit {
			t.Errorf("Redis ran %v for %s (longer than %s)", l.Args[:min(len(l.Args), 3)], l.Duration, limit)
		}
	}
	t.Logf("the slowest command Redis ran took %s: %v", slowest, what)
}

// Beyond the issue: a tenant learning the other tenants' callers. Key names carry
// identities (often API keys or users), so listing keys, watching keyspace events,
// monitoring commands or listing clients would expose another namespace's callers. Every
// such command is refused to a namespace's user.
func TestTenantCannotSeeOtherTenantsCallers(t *testing.T) {
	_, _, attacker := newAttack(t)
	for _, cmd := range [][]any{
		{"SCAN", "0"}, {"KEYS", "*"}, {"RANDOMKEY"}, {"DBSIZE"}, {"CLIENT", "LIST"}, {"CLIENT", "INFO"},
		{"MONITOR"}, {"SLOWLOG", "GET"}, {"LATENCY", "LATEST"}, {"INFO", "keyspace"}, {"MEMORY", "STATS"},
		{"OBJECT", "FREQ", "{rl:" + ns + "/api:alice}:limit"}, {"PSUBSCRIBE", "__keyspace@0__:*"},
		{"SUBSCRIBE", "__keyevent@0__:set"}, {"PUBSUB", "CHANNELS"}, {"CONFIG", "SET", "notify-keyspace-events", "KEA"},
		{"FUNCTION", "LIST"}, {"FUNCTION", "DUMP"}, {"ACL", "WHOAMI"}, {"ACL", "LOG"},
	} {
		err := attacker.Do(attackCtx(t), cmd...).Err()
		if cmd[0] == "ACL" && cmd[1] == "WHOAMI" {
			continue // ACL WHOAMI is always allowed; it names the caller only
		}
		noperm(t, fmt.Sprint(cmd...), err)
	}
}
