package limiter

import (
	"context"

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
// that hit NOSCRIPT are sent again with EVAL in a second pipeline. On Redis Cluster,
// go-redis splits the pipeline by node, so keys of different slots are fine.
func evalBatch(ctx context.Context, rdb redis.UniversalClient, calls []*call) {
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
		calls[i].finish(cmd.Result())
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
		calls[i].finish(cmds[i].Result())
	}
}
