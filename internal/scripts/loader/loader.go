package loader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/redis/go-redis/v9"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/ratelimit-dev/ratelimit-operator/internal/scripts"
)

// ErrRedisUnavailable wraps every failure to reach Redis while loading scripts.
var ErrRedisUnavailable = errors.New("redis unavailable")

// ScriptLoader keeps the limiter scripts loaded on every Redis primary: SCRIPT LOAD on each
// primary (on Cluster, each node, not one routed connection), verified with SCRIPT EXISTS,
// and checked again every Resync so a restart or SCRIPT FLUSH is repaired. With Functions,
// it also keeps each script loaded as a Redis function library (FUNCTION LOAD), which
// replicas receive and persistence keeps. It is a manager Runnable; Changed tells the
// policy controller when the loaded state flips.
type ScriptLoader struct {
	// Client reaches Redis (standalone, Cluster or Sentinel).
	Client redis.UniversalClient
	// Functions also loads every script as a function library (scripts.Script.Library),
	// for sidecars that call them with FCALL (per-namespace users may run nothing else).
	Functions bool
	// Resync is how often loaded scripts are checked. Default 10s.
	Resync time.Duration
	// Timeout bounds one round of loading. Default 5s.
	Timeout time.Duration
	// Log receives reload and failure messages.
	Log logr.Logger
	// OnReload, when set, is told that scripts known loaded had gone missing (a Redis
	// restart or SCRIPT FLUSH) and were loaded again.
	OnReload func(ctx context.Context, scripts int)

	syncMu sync.Mutex // one round at a time, so outcomes are recorded in order

	mu        sync.Mutex
	loaded    bool
	lastErr   error
	lastRound time.Time
	changed   chan event.GenericEvent
	foreign   []string // function libraries not the limiter's, as last reported
}

// Changed delivers an event whenever the scripts' loaded state changes; the policy
// controller re-evaluates its policies then.
func (l *ScriptLoader) Changed() chan event.GenericEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan event.GenericEvent, 1)
	}
	return l.changed
}

// Loaded reports whether every script is known loaded on every primary, and the last error.
func (l *ScriptLoader) Loaded() (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.loaded, l.lastErr
}

// Ensure loads the scripts if they are not known loaded. Cheap when they are, and while
// Redis is known unavailable: a round that failed less than Resync ago is not retried here
// (the periodic check retries, and Changed reports the recovery). Otherwise every policy
// reconcile during an outage would wait on Redis (up to Timeout each, one after another),
// stalling the policy controller for every other change.
func (l *ScriptLoader) Ensure(ctx context.Context) error {
	if ok, err := l.known(); ok {
		return err
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	if ok, err := l.known(); ok { // a round finished while this one waited
		return err
	}
	return l.syncLocked(ctx)
}

// known returns the outcome of the last round when it still stands: loaded, or failed less
// than Resync ago.
func (l *ScriptLoader) known() (ok bool, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.loaded:
		return true, nil
	case l.lastErr != nil && time.Since(l.lastRound) < l.resync():
		return true, l.lastErr
	}
	return false, nil
}

// Start implements manager.Runnable: a periodic check until ctx ends.
func (l *ScriptLoader) Start(ctx context.Context) error {
	wait.NonSlidingUntilWithContext(ctx, func(ctx context.Context) {
		if err := l.sync(ctx); err != nil {
			l.Log.Info("scripts not loaded; will retry", "error", err.Error())
		}
	}, l.resync())
	return nil
}

// NeedLeaderElection implements manager.LeaderElectionRunnable: every replica may load.
func (l *ScriptLoader) NeedLeaderElection() bool { return false }

func (l *ScriptLoader) resync() time.Duration {
	if l.Resync <= 0 {
		return 10 * time.Second
	}
	return l.Resync
}

// sync checks every primary and loads what is missing; it records the outcome.
func (l *ScriptLoader) sync(ctx context.Context) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	return l.syncLocked(ctx)
}

// syncLocked is sync with syncMu held.
func (l *ScriptLoader) syncLocked(ctx context.Context) error {
	timeout := l.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wasLoaded, _ := l.Loaded()
	reloaded, err := l.syncPrimaries(ctx)
	if reloaded > 0 && err == nil {
		scriptLoads.Add(float64(reloaded))
		l.Log.Info("loaded limiter scripts", "scripts", reloaded, "repair", wasLoaded)
		if wasLoaded && l.OnReload != nil {
			l.OnReload(ctx, reloaded)
		}
	}
	if err != nil {
		scriptLoadFailures.Inc()
		err = fmt.Errorf("%w: %w", ErrRedisUnavailable, err)
	}
	l.record(err == nil, err)
	return err
}

func (l *ScriptLoader) record(ok bool, err error) {
	l.mu.Lock()
	flipped := ok != l.loaded
	l.loaded, l.lastErr, l.lastRound = ok, err, time.Now()
	ch := l.changed
	l.mu.Unlock()
	if flipped && ch != nil {
		select {
		case ch <- event.GenericEvent{}:
		default: // one pending notification is enough
		}
	}
}

// syncPrimaries runs fn on each primary and returns how many scripts it had to load.
func (l *ScriptLoader) syncPrimaries(ctx context.Context) (int, error) {
	var mu sync.Mutex
	total := 0
	foreign := map[string]bool{}
	each := func(ctx context.Context, c *redis.Client) error {
		n, err := ensureOn(ctx, c)
		var others []string
		if err == nil && l.Functions {
			var f int
			f, others, err = ensureFunctionsOn(ctx, c)
			n += f
		}
		mu.Lock()
		total += n
		for _, o := range others {
			foreign[o] = true
		}
		mu.Unlock()
		return err
	}
	defer func() { l.reportForeign(foreign) }()
	var err error
	switch c := l.Client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, each)
	case *redis.Client:
		err = each(ctx, c)
	default:
		err = fmt.Errorf("unsupported redis client %T", l.Client)
	}
	return total, err
}

// ensureOn loads every script missing on one node and verifies them all.
func ensureOn(ctx context.Context, c *redis.Client) (int, error) {
	all := scripts.All()
	shas := make([]string, len(all))
	for i, s := range all {
		shas[i] = s.SHA
	}
	exists, err := c.ScriptExists(ctx, shas...).Result()
	if err != nil {
		return 0, fmt.Errorf("%s: SCRIPT EXISTS: %w", c.Options().Addr, err)
	}
	loaded := 0
	for i, s := range all {
		if exists[i] {
			continue
		}
		sha, err := c.ScriptLoad(ctx, s.Source).Result()
		if err != nil {
			return loaded, fmt.Errorf("%s: SCRIPT LOAD %s: %w", c.Options().Addr, s.Name, err)
		}
		if sha != s.SHA {
			return loaded, fmt.Errorf("%s: SCRIPT LOAD %s returned %s, want %s", c.Options().Addr, s.Name, sha, s.SHA)
		}
		loaded++
	}
	return loaded, nil
}

// ensureFunctionsOn loads, as its own function library, every script missing on one node or
// held there with other code, and returns how many it loaded, with the libraries the node
// holds that are not the limiter's. Two FUNCTION LISTs answer for all of them; a library is
// named by its script's SHA, so libraries of other versions (the sidecars of a rolling
// upgrade may still call them) are left alone.
func ensureFunctionsOn(ctx context.Context, c *redis.Client) (int, []string, error) {
	all, err := c.FunctionList(ctx, redis.FunctionListQuery{}).Result()
	if err != nil {
		return 0, nil, fmt.Errorf("%s: FUNCTION LIST: %w", c.Options().Addr, err)
	}
	var foreign []string
	for _, lib := range all {
		if !strings.HasPrefix(lib.Name, scripts.FunctionPrefix) {
			foreign = append(foreign, lib.Name)
		}
	}
	libs, err := c.FunctionList(ctx, redis.FunctionListQuery{LibraryNamePattern: scripts.FunctionPrefix + "*", WithCode: true}).Result()
	if err != nil {
		return 0, foreign, fmt.Errorf("%s: FUNCTION LIST: %w", c.Options().Addr, err)
	}
	have := make(map[string]string, len(libs))
	for _, lib := range libs {
		have[lib.Name] = lib.Code
	}
	loaded := 0
	for _, s := range scripts.All() {
		code, ok := have[s.Function]
		if ok && code == s.Library() {
			continue
		}
		if err := c.FunctionLoadReplace(ctx, s.Library()).Err(); err != nil {
			return loaded, foreign, fmt.Errorf("%s: FUNCTION LOAD %s (%s): %w", c.Options().Addr, s.Function, s.Name, err)
		}
		loaded++
	}
	return loaded, foreign, nil
}

// reportForeign publishes the function libraries other than the limiter's found on the
// primaries, and logs when that set changes: a namespace's user may FCALL any function on
// the server, so a library loaded by other software is code every tenant can run.
func (l *ScriptLoader) reportForeign(found map[string]bool) {
	names := slices.Sorted(maps.Keys(found))
	foreignLibraries.Set(float64(len(names)))
	l.mu.Lock()
	changed := !slices.Equal(names, l.foreign)
	l.foreign = names
	l.mu.Unlock()
	if changed && len(names) > 0 {
		l.Log.Info("Redis holds function libraries that are not the limiter's; every namespace's user may call them (FCALL): give the limiter a Redis of its own, or delete them",
			"libraries", names)
	}
}
