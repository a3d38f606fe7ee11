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
//     and a closed node client before it asks; none of those ran the script. The node
//     client has stamped the attempt's error on the command by then (Client.Process), so
//     NoRetry judges this attempt.
//   - A Client (standalone, Sentinel, each Cluster node) resends while MaxRetries allows,
//     unless NoRetry (redis.go, baseClient.processWithRetry: "(cmd.NoRetry() && !forced)").
//     It asks before the attempt's error is stamped on the command, so a onceCmd is never
//     resent there at all; redisconn's MaxRetries -1 makes it one attempt anyway.
//   - A pipeline resends the whole batch unless one command says NoRetry (redis.go,
//     generalProcessPipelineFrom: "|| cmdsContainNoRetry(cmds)").
//
// So every script call goes out as a onceCmd, whose NoRetry is true unless its error proves
// the script had no effect (notRun: TRYAGAIN, CLUSTERDOWN, LOADING, ... or a connection never
// made); the cluster loop keeps retrying those as before. Client options cannot express
// this: MaxRetries does not bound the cluster loop, and MaxRedirects 0 would stop MOVED and
// ASK from being followed too.
type onceCmd struct{ *redis.Cmd }

// NoRetry tells go-redis not to send the command again unless Redis said it did not run.
func (c onceCmd) NoRetry() bool { return !notRun(c.Err()) }

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

// evalSHA is an EVALSHA of the script, built as go-redis's Cmdable.EvalSha builds it.
func (s *Script) evalSHA(ctx context.Context, keys []string, args []any) *redis.Cmd {
	return scriptCmd(ctx, "evalsha", s.shaArg, keys, args)
}

// eval is an EVAL of the script's body.
func (s *Script) eval(ctx context.Context, keys []string, args []any) *redis.Cmd {
	return scriptCmd(ctx, "eval", s.srcArg, keys, args)
}

// scriptCmd builds name payload numkeys keys... args..., with the first key at position 3 so
// that the cluster client routes it by that key without parsing.
func scriptCmd(ctx context.Context, name string, payload any, keys []string, args []any) *redis.Cmd {
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
