package limiter

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// evalOne runs one script call: EVALSHA, and on NOSCRIPT (first use, restart, SCRIPT FLUSH)
// EVAL once with the body, which also caches it for the next EVALSHA. Each is sent at most
// once (see onceCmd), unless Redis answers that it did not run it and to try again shortly
// (TRYAGAIN during a slot migration, CLUSTERDOWN during a failover): then the call goes
// again, up to maxAgain times with a growing pause, while ctx lasts.
func evalOne(ctx context.Context, rdb processor, s *Script, keys []string, args []any) (any, error) {
	for again := 0; ; again++ {
		v, err := evalOnce(ctx, rdb, s, keys, args)
		if !tryAgain(err) || again == maxAgain || !pause(ctx, againPause<<again) {
			return v, err
		}
	}
}

const (
	// maxAgain bounds the resends of one call after TRYAGAIN or CLUSTERDOWN (go-redis's
	// default MaxRedirects, which bounded them before the limiter took them over).
	maxAgain = 3
	// againPause is the pause before the first resend; it doubles for each next one.
	againPause = 8 * time.Millisecond
)

// evalOnce is EVALSHA, and EVAL after NOSCRIPT; for the function flavour, FCALL only (a
// missing function is the manager's to load: the caller may not).
func evalOnce(ctx context.Context, rdb processor, s *Script, keys []string, args []any) (any, error) {
	v, err := send(ctx, rdb, s.evalSHA(ctx, keys, args)).Result()
	if isNoScript(err) && !s.fcall {
		v, err = send(ctx, rdb, s.eval(ctx, keys, args)).Result()
	}
	return v, err
}

// pause waits d, or reports false if ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func isNoScript(err error) bool {
	return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT")
}

// evalBatch runs many script calls in one pipeline (one round trip per Redis node). Calls
// that hit NOSCRIPT are sent again with EVAL in a second pipeline. On Redis Cluster the calls
// are grouped by the primary owning their slot (evalClusterBatch).
func evalBatch(ctx context.Context, rdb redis.UniversalClient, calls []*call) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		evalClusterBatch(ctx, cc, calls)
		return
	}
	evalPipeline(ctx, rdb, share(calls), false)
}

// evalClusterBatch pipelines each primary's calls on that node's own connection, the nodes in
// parallel, and each node's goroutine then sends the calls that node redirected (MOVED, ASK,
// TRYAGAIN, CLUSTERDOWN, READONLY: the script did not run; or a node client closed before
// sending) one by one through the cluster client, which follows redirects. They go at once,
// not after every node has answered: a stalled node must not hold up, and time out, calls
// that belong to healthy ones. go-redis's own cluster pipeline is not used: on a retryable
// error it re-sends the whole node batch, running scripts that had already run (a double
// debit), measured during slot migrations.
func evalClusterBatch(ctx context.Context, cc *redis.ClusterClient, calls []*call) {
	byNode := map[*redis.Client][]*call{}
	for _, c := range calls {
		node, err := cc.MasterForKey(ctx, c.keys[0])
		if err != nil {
			c.finish(nil, err)
			continue
		}
		byNode[node] = append(byNode[node], c)
	}
	var wg sync.WaitGroup
	for node, group := range byNode {
		wg.Go(func() {
			for _, c := range evalPipeline(ctx, node, group, true) {
				c.finish(evalOne(ctx, cc, c.script, c.keys, c.args))
			}
		})
	}
	wg.Wait()
}

// evalPipeline is evalBatch on one pipeline. With keepRedirects, the calls a cluster node
// redirected are returned unfinished, for the caller to re-send; the others are finished.
func evalPipeline(ctx context.Context, rdb redis.Cmdable, calls []*call, keepRedirects bool) []*call {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = send(ctx, pipe, c.script.evalSHA(ctx, c.keys, c.args))
		}
		return nil
	})
	var retry, redirects []*call
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) && !calls[i].script.fcall {
			retry = append(retry, calls[i])
			continue
		}
		redirects = settle(calls[i], cmd, keepRedirects, redirects)
	}
	if len(retry) == 0 {
		return redirects
	}
	cmds = cmds[:len(retry)]
	_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range retry {
			cmds[i] = send(ctx, pipe, c.script.eval(ctx, c.keys, c.args))
		}
		return nil
	})
	for i, c := range retry {
		redirects = settle(c, cmds[i], keepRedirects, redirects)
	}
	return redirects
}

// settle finishes c with the reply of cmd, or, for a cluster redirect when keepRedirects is
// set, appends c to redirects instead.
func settle(c *call, cmd *redis.Cmd, keepRedirects bool, redirects []*call) []*call {
	v, err := cmd.Result()
	if keepRedirects && redirected(err) {
		return append(redirects, c)
	}
	c.answer(v, err)
	return redirects
}
