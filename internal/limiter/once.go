package limiter

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// At most once. A script call that Redis may have run is never sent again: after a lost
// reply (EOF, reset, timeout) it fails, and the policy's failure mode answers. go-redis
// v9.23 resends a command in three places, and each asks the command first:
//
//   - The cluster client's redirect loop, bounded by MaxRedirects and not by MaxRetries,
//     resends after EOF and read timeouts too, first to the same node, then to a
//     re-resolved one (osscluster.go, ClusterClient.process: "if shouldRetry(lastErr, ...)
//     && !cmd.NoRetry()"). It follows MOVED and ASK (with ASKING) and retries after READONLY
//     and a closed node client before it asks; none of those ran the script.
//   - A Client (standalone, Sentinel, each Cluster node) resends while MaxRetries allows,
//     unless NoRetry (redis.go, baseClient.processWithRetry: "(cmd.NoRetry() && !forced)";
//     forced is a connection closed before the command was written).
//   - A pipeline resends the whole batch unless one command says NoRetry (redis.go,
//     generalProcessPipelineFrom: "|| cmdsContainNoRetry(cmds)").
//
// So every script call goes out as a onceCmd, whose NoRetry is always true. It cannot
// depend on the error: a Client asks before it puts the attempt's error on the command, so
// inside a node client's retries the command still carries the previous attempt's error (a
// MOVED the cluster loop followed, say), which would permit resending after an EOF. The
// replies after which the same call may go again because the script did not run, TRYAGAIN
// and CLUSTERDOWN, are retried by evalOne itself. Client options cannot express this:
// MaxRetries does not bound the cluster loop, and MaxRedirects 0 would stop MOVED and ASK
// from being followed too.
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis never to send the command again on its own.
func (onceCmd) NoRetry() bool { return true }

// processor sends commands: a client, or a pipeline that queues them.
type processor interface {
	Process(ctx context.Context, cmd redis.Cmder) error
}

// send sends cmd through rdb at most once (see onceCmd). Through a pipeline the command is
// only queued; its result is there once the pipeline has run.
func send(ctx context.Context, rdb processor, cmd *redis.Cmd) *redis.Cmd {
	_ = rdb.Process(ctx, onceCmd{cmd}) // the error is the command's own, cmd.Err()
	return cmd
}

// evalSHA is an EVALSHA of the script, built as go-redis's Cmdable.EvalSha builds it; for
// the function flavour, an FCALL of its function.
func (s *Script) evalSHA(ctx context.Context, keys []string, args []any) *redis.Cmd {
	return scriptCmd(ctx, s.cmd, s.payload, keys, args)
}

// eval is an EVAL of the script's body.
func (s *Script) eval(ctx context.Context, keys []string, args []any) *redis.Cmd {
	return scriptCmd(ctx, "eval", s.srcArg, keys, args)
}

// scriptCmd builds name payload numkeys keys... args..., with the first key at position 3 so
// that the cluster client routes it by that key without parsing.
func scriptCmd(ctx context.Context, name, payload any, keys []string, args []any) *redis.Cmd {
	a := make([]any, 3+len(keys), 3+len(keys)+len(args))
	a[0], a[1], a[2] = name, payload, len(keys)
	for i, k := range keys {
		a[3+i] = k
	}
	cmd := redis.NewCmd(ctx, append(a, args...)...)
	if len(keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	return cmd
}
