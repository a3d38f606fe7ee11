package redisacl_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// TestPasswordRotationOnServer shows on a real server what rotation relies on: while the
// user holds both passwords a new connection authenticates with either; once the old one
// is removed, a connection authenticated with it keeps working (Redis checks passwords at
// AUTH only, and Ensure's ACL SETUSER reset ... closes no connection), while a new
// connection with it is refused; deleting the user closes its connections.
func TestPasswordRotationOnServer(t *testing.T) {
	t.Parallel()
	srv, u := standaloneAdmin(t)
	ctx := testCtx(t)
	oldPass, newPass := password(t), password(t)
	ensure(ctx, t, u, tenant(t, "rot", false, oldPass))
	held := single(t, srv, oldPass)
	mustPing(ctx, t, held, "old password, before the rotation")

	ensure(ctx, t, u, tenant(t, "rot", false, oldPass, newPass))
	mustPing(ctx, t, single(t, srv, newPass), "new connection, new password, both accepted")
	mustPing(ctx, t, single(t, srv, oldPass), "new connection, old password, both accepted")
	mustPing(ctx, t, held, "connection of the old password, new one added")

	ensure(ctx, t, u, tenant(t, "rot", false, newPass))
	mustPing(ctx, t, held, "connection of the old password, after its removal")
	if err := single(t, srv, oldPass).Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("new connection with the removed password: %v; want WRONGPASS", err)
	}
	mustPing(ctx, t, single(t, srv, newPass), "new connection, new password, after the removal")

	if err := u.Delete(ctx, prefix+"rot"); err != nil {
		t.Fatal(err)
	}
	if err := held.Ping(ctx).Err(); err == nil {
		t.Fatal("a connection of a deleted user still answers; want it closed")
	}
}

// single is a one-connection client of user ratelimit-ns-rot that never reconnects
// silently: a closed connection shows as an error.
func single(t *testing.T, srv *redistest.Server, pass string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: prefix + "rot", Password: pass, PoolSize: 1, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func mustPing(ctx context.Context, t *testing.T, c *redis.Client, what string) {
	t.Helper()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s: PING %v", what, err)
	}
}
