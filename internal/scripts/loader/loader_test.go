package loader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// TestEnsureUnavailableIsCheap: while Redis is known unavailable, Ensure answers from the
// last round instead of waiting on Redis again, until Resync has passed.
func TestEnsureUnavailableIsCheap(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l := &ScriptLoader{Client: rdb, Resync: 300 * time.Millisecond, Timeout: time.Second, Log: logr.Discard()}
	ctx := context.Background()
	err := l.Ensure(ctx)
	if !errors.Is(err, ErrRedisUnavailable) {
		t.Fatalf("Ensure: %v, want ErrRedisUnavailable", err)
	}
	rounds := metricValue(t, scriptLoadFailures)
	for range 100 {
		if again := l.Ensure(ctx); again == nil || again.Error() != err.Error() {
			t.Fatalf("cached Ensure: %v, want %v", again, err)
		}
	}
	if n := metricValue(t, scriptLoadFailures) - rounds; n != 0 {
		t.Fatalf("%v rounds against Redis within Resync, want 0", n)
	}
	time.Sleep(l.Resync)
	if err := l.Ensure(ctx); !errors.Is(err, ErrRedisUnavailable) {
		t.Fatalf("Ensure after Resync: %v", err)
	}
	if n := metricValue(t, scriptLoadFailures) - rounds; n != 1 {
		t.Fatalf("%v rounds after Resync, want 1", n)
	}
}

// TestScriptLoaderRepairs: the loader loads every script, reloads after SCRIPT FLUSH on its
// next round, and reports loaded-state flips on Changed (down and up again).
func TestScriptLoaderRepairs(t *testing.T) {
	s := redistest.StartServer(t)
	opts := s.Options()
	opts.MaxRetries = -1
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	l := &ScriptLoader{Client: rdb, Resync: 100 * time.Millisecond, Timeout: time.Second, Log: logr.Discard()}
	changed := l.Changed()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
	expectChanged(t, changed, "first load")
	waitLoaded(t, rdb)
	if ok, err := l.Loaded(); !ok || err != nil {
		t.Fatalf("Loaded %v %v", ok, err)
	}

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	waitLoaded(t, rdb)

	s.Kill()
	expectChanged(t, changed, "Redis down")
	if ok, err := l.Loaded(); ok || !errors.Is(err, ErrRedisUnavailable) {
		t.Fatalf("Loaded %v %v while Redis is down", ok, err)
	}
	s.Restart(t)
	expectChanged(t, changed, "Redis back")
	waitLoaded(t, rdb)
}

func expectChanged(t *testing.T, ch <-chan event.GenericEvent, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no Changed event within 10s", what)
	}
}

func waitLoaded(t *testing.T, rdb *redis.Client) {
	t.Helper()
	var shas []string
	for _, s := range scripts.All() {
		shas = append(shas, s.SHA)
	}
	if err := wait.Poll(10*time.Second, 20*time.Millisecond, func() error {
		exists, err := rdb.ScriptExists(context.Background(), shas...).Result()
		if err == nil && slices.Contains(exists, false) {
			return fmt.Errorf("loaded: %v", exists)
		}
		return err
	}); err != nil {
		t.Fatalf("scripts not loaded: %v", err)
	}
}

// TestScriptLoaderLoadsFunctions: with Functions, the loader keeps every script loaded as
// its own function library, named by its SHA, with exactly the code the sidecars expect; it
// loads them again after FUNCTION FLUSH, restores a library whose code was replaced, leaves
// other versions' libraries alone, and the primary's replica receives them (a failover
// finds them there). A library of other software, which every namespace's user could call,
// is reported (ratelimit_redis_foreign_function_libraries).
func TestScriptLoaderLoadsFunctions(t *testing.T) {
	s := redistest.StartServer(t)
	replica := redistest.StartReplica(t, s)
	rdb := s.Client()
	ctx := context.Background()
	other := "#!lua name=" + scripts.FunctionPrefix + "0000000000000000000000000000000000000000\n" +
		"redis.register_function('" + scripts.FunctionPrefix + "0000000000000000000000000000000000000000', function() return 1 end)"
	if err := rdb.FunctionLoad(ctx, other).Err(); err != nil {
		t.Fatal(err)
	}
	load := func(what string) {
		t.Helper()
		l := &ScriptLoader{Client: rdb, Functions: true, Timeout: time.Second, Log: logr.Discard()}
		if err := l.Ensure(ctx); err != nil {
			t.Fatalf("%s: Ensure: %v", what, err)
		}
		requireFunctions(t, rdb, what)
	}
	load("first load")
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	load("after FUNCTION FLUSH")
	s0 := scripts.All()[0]
	forged := "#!lua name=" + s0.Function + "\nredis.register_function('" + s0.Function + "', function() return 1 end)"
	if err := rdb.FunctionLoadReplace(ctx, forged).Err(); err != nil {
		t.Fatal(err)
	}
	load("after a library was replaced")
	wait.Eventually(t, 10*time.Second, "the replica holds the functions", func() error {
		return haveFunctions(replica.Client())
	})
	if err := rdb.FunctionFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rdb.FunctionLoad(ctx, other).Err(); err != nil {
		t.Fatal(err)
	}
	load("with another version's library")
	// The other version's whole name: a pattern such as "0*" also matches a real library
	// whose SHA1 begins with 0.
	if n, err := rdb.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.FunctionPrefix + strings.Repeat("0", 40)}).Result(); err != nil || len(n) != 1 {
		t.Fatalf("another version's library: %v, %v; want it left alone", n, err)
	}
	if n := metricValue(t, foreignLibraries); n != 0 {
		t.Fatalf("ratelimit_redis_foreign_function_libraries %v with only the limiter's libraries", n)
	}
	if err := rdb.FunctionLoad(ctx, "#!lua name=other_software\nredis.register_function('loop', function() while true do end end)").Err(); err != nil {
		t.Fatal(err)
	}
	load("beside another software's library")
	if n := metricValue(t, foreignLibraries); n != 1 {
		t.Fatalf("ratelimit_redis_foreign_function_libraries %v; want 1: a library every tenant may call", n)
	}
}

// requireFunctions fails unless rdb holds every script as its function library.
func requireFunctions(t *testing.T, rdb *redis.Client, what string) {
	t.Helper()
	if err := haveFunctions(rdb); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// haveFunctions reports the first script rdb does not hold as its function library, with
// exactly its code.
func haveFunctions(rdb *redis.Client) error {
	libs, err := rdb.FunctionList(context.Background(), redis.FunctionListQuery{LibraryNamePattern: scripts.FunctionPrefix + "*", WithCode: true}).Result()
	if err != nil {
		return err
	}
	code := map[string]string{}
	for _, l := range libs {
		code[l.Name] = l.Code
	}
	for _, s := range scripts.All() {
		if code[s.Function] != s.Library() {
			return fmt.Errorf("library %s (%s) missing or with other code", s.Function, s.Name)
		}
	}
	return nil
}
