package limiter

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call waiting for a pipeline. Calls are pooled: the caller owns its call
// again once it has received the result, and puts it back (newCall, release); a caller that
// gave up leaves its call to the garbage collector, since a worker may still answer it.
type call struct {
	script *Script
	keys   []string
	args   []any
	done   chan result // buffered: a caller that gave up never blocks the worker
	// members, for a shared call (share), are the checks it carries, each answered from
	// its reply; such a call is never pooled.
	members []*call
	// policy is the policy a check's call is for: only one policy's checks share a call, so
	// that a policy whose calls fail (keys outside the user's ACL: NOPERM for the whole
	// call) fails no other's.
	policy *Policy
}

type result struct {
	val any
	err error
}

var calls = sync.Pool{New: func() any { return &call{done: make(chan result, 1)} }}

func newCall(s *Script, keys []string, args []any) *call {
	c := calls.Get().(*call) //nolint:forcetypeassert // the pool holds nothing else
	c.script, c.keys, c.args = s, keys, args
	return c
}

// release returns a call whose result has been received (or that was never sent) to the pool.
func (c *call) release() {
	c.script, c.keys, c.args, c.policy = nil, nil, nil, nil
	calls.Put(c)
}

// finish answers the call. Its caller may reuse it at once: nothing may touch c afterwards.
func (c *call) finish(v any, err error) { c.done <- result{v, err} }

// batcher coalesces concurrent checks into pipelines. Each worker takes one waiting call,
// then whatever else is queued (up to maxBatch), and sends them in one round trip. No timer
// delays a call: a lone call goes out after a few scheduler passes, and batches form only
// under load, where they save round trips (see fill).
type batcher struct {
	rdb      redis.UniversalClient
	queue    chan *call
	maxBatch int
	timeout  time.Duration
	stop     chan struct{}
	// batches and calls count round trips and the checks they carried (PipelineStats).
	batches, calls atomic.Uint64
}

func newBatcher(rdb redis.UniversalClient, workers, maxBatch int, timeout time.Duration) *batcher {
	b := &batcher{rdb: rdb, queue: make(chan *call, workers*maxBatch), maxBatch: maxBatch,
		timeout: timeout, stop: make(chan struct{})}
	for range workers {
		go b.work()
	}
	return b
}

// submit queues c; it fails fast when the queue is full (Redis is not keeping up).
func (b *batcher) submit(c *call) bool {
	select {
	case b.queue <- c:
		return true
	default:
		return false
	}
}

func (b *batcher) close() { close(b.stop) }

func (b *batcher) work() {
	batch := make([]*call, 0, b.maxBatch)
	for {
		select {
		case <-b.stop:
			return
		case c := <-b.queue:
			batch = append(batch[:0], c)
		}
		b.run(b.fill(batch))
	}
}

// maxYields bounds how often fill yields the processor while gathering one batch.
const maxYields = 4

// fill adds queued calls to batch. Under load, the callers that the previous round trip
// answered are runnable but have not queued their next check yet; yielding the processor
// (runtime.Gosched) lets them run and join this round trip instead of paying for one of
// their own. fill yields again only while the last yield brought new calls, at most
// maxYields times, so the added wait is a few scheduler passes and no yield outlasts
// what the other runnable goroutines do meanwhile. It makes batches larger and the limiter
// faster under load (docs/benchmarks.md, "Measurements behind the defaults").
func (b *batcher) fill(batch []*call) []*call {
	batch = b.drain(batch)
	for range maxYields {
		if len(batch) >= b.maxBatch {
			break
		}
		n := len(batch)
		runtime.Gosched()
		if batch = b.drain(batch); len(batch) == n {
			break
		}
	}
	return batch
}

// drain moves queued calls into batch, up to maxBatch, without waiting.
func (b *batcher) drain(batch []*call) []*call {
	for len(batch) < b.maxBatch {
		select {
		case c := <-b.queue:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

func (b *batcher) run(batch []*call) {
	b.batches.Add(1)
	b.calls.Add(uint64(len(batch)))
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		c.finish(evalOne(ctx, b.rdb, c.script, c.keys, c.args))
		return
	}
	evalBatch(ctx, b.rdb, batch)
}
