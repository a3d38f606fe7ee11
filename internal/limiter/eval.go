package limiter

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// evalOne runs one script call: EVALSHA, and on NOSCRIPT (first use, restart, SCRIPT FLUSH)
// EVAL once with the body, which also caches it for the next EVALSHA.
func evalOne(ctx context.Context, rdb redis.Scripter, s *Script, keys []string, args []any) (any, error) {
	v, err := s.script.EvalSha(ctx, rdb, keys, args...).Result()
	if isNoScript(err) {
		v, err = s.script.Eval(ctx, rdb, keys, args...).Result()
	}
	return v, err //nolint:wrapcheck // the caller wraps with the policy's name.
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
	evalPipeline(ctx, rdb, calls)
}

// evalClusterBatch pipelines each primary's calls on that node's own connection, then sends
// the calls a node redirected (MOVED, ASK, TRYAGAIN, CLUSTERDOWN: the script did not run)
// one by one through the cluster client, which follows redirects. go-redis's own cluster
// pipeline is not used: on a retryable error it re-sends the whole node batch, running
// scripts that had already run (a double debit), measured during slot migrations.
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
		for _, c := range group {
			c.redirect = true
		}
		wg.Go(func() { evalPipeline(ctx, node, group) }) // the nodes answer in parallel
	}
	wg.Wait()
	for _, group := range byNode {
		for _, c := range group {
			if c.redirected != nil {
				c.finish(evalOne(ctx, cc, c.script, c.keys, c.args))
			}
		}
	}
}

// isRedirect reports a cluster reply after which the script did not run on this node.
func isRedirect(err error) bool {
	if err == nil {
		return false
	}
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}

// evalPipeline is evalBatch on one pipeline.
func evalPipeline(ctx context.Context, rdb redis.Cmdable, calls []*call) {
	cmds := make([]*redis.Cmd, len(calls))
	_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, c := range calls {
			cmds[i] = c.script.script.EvalSha(ctx, pipe, c.keys, c.args...)
		}
		return nil
	})
	var retry []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			retry = append(retry, i)
			continue
		}
		calls[i].settle(cmd.Result())
	}
	if len(retry) == 0 {
		return
	}
	_, _ = rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, i := range retry {
			cmds[i] = calls[i].script.script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
		}
		return nil
	})
	for _, i := range retry {
		calls[i].settle(cmds[i].Result())
	}
}
