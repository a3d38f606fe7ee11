package limiter

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// call is one script call waiting for a pipeline.
type call struct {
	script *Script
	keys   []string
	args   []any
	done   chan result // buffered: a caller that gave up never blocks the worker
	// redirect, set for calls pipelined on one cluster node, keeps a redirect error in
	// redirected instead of finishing the call, so it can be re-sent through the cluster.
	redirect   bool
	redirected error
}

type result struct {
	val any
	err error
}

func (c *call) finish(v any, err error) { c.done <- result{v, err} }

// settle finishes the call, or records a cluster redirect when the call asked for that.
func (c *call) settle(v any, err error) {
	if c.redirect && isRedirect(err) {
		c.redirected = err
		return
	}
	c.finish(v, err)
}

// batcher coalesces concurrent checks into pipelines. Each worker takes one waiting call,
// then whatever else is already queued (up to maxBatch), and sends them in one round trip:
// no artificial delay is added, so a lone call goes out at once and batches form only
// under load, where they save round trips.
type batcher struct {
	rdb      redis.UniversalClient
	queue    chan *call
	maxBatch int
	timeout  time.Duration
	stop     chan struct{}
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
	drain:
		for len(batch) < b.maxBatch {
			select {
			case c := <-b.queue:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		b.run(batch)
	}
}

func (b *batcher) run(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), b.timeout)
	defer cancel()
	if len(batch) == 1 {
		c := batch[0]
		c.finish(evalOne(ctx, b.rdb, c.script, c.keys, c.args))
		return
	}
	evalBatch(ctx, b.rdb, batch)
}
