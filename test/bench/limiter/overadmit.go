package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/internal/limiter"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// overPeriod is the period of the over-admission limit: so long that nothing refills while
// the check runs (TokenBucket and GCRA give one request back per overPeriod/L, an hour at
// L=1000) and that a fixed window boundary is as good as never crossed.
const overPeriod = 1000 * time.Hour

// overResult is the over-admission check of one script: the worst of its runs.
type overResult struct {
	limit    int // L
	attempts int // checks per run
	admitted int // the most any run admitted
	fewest   int // the fewest any run admitted (set by the lease check: L - fewest is its under-admission)
	runs     int
}

// excess is admitted - L: above 0 the script admitted more than its limit.
func (o overResult) excess() int { return o.admitted - o.limit }

// overAdmission hammers one fresh identity with a limit of L per overPeriod (no refill while
// it runs) from c.overCallers goroutines spread over c.overClients separate Redis clients,
// each with its own limiter (half pipelining, half not), released together; about 2L checks
// in all. Repeated c.reps times with a fresh identity; the worst run counts. For the
// baseline fixture (alg empty) the same with its script, refilling L per overPeriod.
func overAdmission(ctx context.Context, c config, srv *redistest.Server, alg limiter.Algorithm) (overResult, error) {
	clients := make([]*redis.Client, max(c.overClients, 1))
	for i := range clients {
		clients[i] = newClient(srv, c.overCallers/len(clients)+1)
	}
	defer func() {
		for _, cl := range clients {
			_ = cl.Close()
		}
	}()
	deciders, closeAll, err := overDeciders(clients, alg, c.overLimit)
	if err != nil {
		return overResult{}, err
	}
	defer closeAll()
	callers := max(c.overCallers, 1)
	per := (2*c.overLimit + callers - 1) / callers
	res := overResult{limit: c.overLimit, attempts: per * callers}
	for run := range max(c.reps, 1) {
		id := fmt.Sprintf("overadmit-%s-%d-%d", alg, run, time.Now().UnixNano())
		admitted, err := hammer(ctx, deciders, callers, per, id)
		if err != nil {
			return res, err
		}
		res.admitted, res.runs = max(res.admitted, admitted), res.runs+1
	}
	return res, nil
}

// decider asks Redis whether identity may make one request: true when admitted.
type decider func(ctx context.Context, identity string) (bool, error)

// overDeciders is one decider per client.
func overDeciders(clients []*redis.Client, alg limiter.Algorithm, limit int) ([]decider, func(), error) {
	var ds []decider
	if alg == "" {
		script := redis.NewScript(baselineSrc)
		rate := float64(limit) / overPeriod.Seconds()
		for _, cl := range clients {
			ds = append(ds, func(ctx context.Context, id string) (bool, error) {
				v, err := script.Run(ctx, cl, []string{"{rl:bench/overadmit:" + id + "}:rate"}, rate, limit, 1, overPeriod.Milliseconds()).Slice()
				if err != nil || len(v) == 0 {
					return false, fmt.Errorf("baseline script: %v %w", v, err)
				}
				return v[0] == int64(1), nil
			})
		}
		return ds, func() {}, nil
	}
	p, err := newPolicy(alg, "bench", "overadmit", limiter.Limit{Name: "rate", Requests: int64(limit), Period: overPeriod}, 0, limiter.FailClosed)
	if err != nil {
		return nil, nil, err
	}
	var lims []*limiter.Limiter
	closeAll := func() {
		for _, l := range lims {
			l.Close()
		}
	}
	for i, cl := range clients {
		l, err := limiter.New(cl, limiter.Options{Pipelining: i%2 == 0, Timeout: 5 * time.Second})
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("limiter: %w", err)
		}
		lims = append(lims, l)
		ds = append(ds, func(ctx context.Context, id string) (bool, error) {
			d := l.Check(ctx, p, limiter.Request{Identity: id})
			if d.WithoutRedis() {
				return false, fmt.Errorf("decided without Redis (%s): %w", d.Source, d.Err)
			}
			return d.Allowed, nil
		})
	}
	return ds, closeAll, nil
}

// hammer releases callers goroutines together, goroutine g deciding per times through
// deciders[g%len(deciders)], and returns how many were admitted.
func hammer(ctx context.Context, deciders []decider, callers, per int, id string) (int, error) {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	start := make(chan struct{})
	for g := range callers {
		decide := deciders[g%len(deciders)]
		wg.Go(func() {
			<-start
			for range per {
				ok, err := decide(ctx, id)
				if err != nil {
					errs <- err
					return
				}
				if ok {
					admitted.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return int(admitted.Load()), errors.Join(all...)
}
