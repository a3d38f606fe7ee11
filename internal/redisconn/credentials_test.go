package redisconn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// kubeletDir lays out a mounted Secret as the kubelet does: each key a symlink to
// ..data/<key>, ..data a symlink to a timestamped directory, and an update an atomic
// rename of a new ..data link.
type kubeletDir struct {
	dir string
	gen int
}

func newKubeletDir(t *testing.T, files map[string]string) *kubeletDir {
	t.Helper()
	k := &kubeletDir{dir: t.TempDir()}
	k.write(t, files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(k.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// write publishes files as the Secret's new content in one atomic switch.
func (k *kubeletDir) write(t *testing.T, files map[string]string) {
	t.Helper()
	k.gen++
	ts := fmt.Sprintf("..%d", k.gen)
	if err := os.Mkdir(filepath.Join(k.dir, ts), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(k.dir, ts, name), []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	if err := os.Symlink(ts, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialsReadPerConnection: a client built once from a mounted Secret picks up a
// rotated password for its new connections without a restart, keeps its authenticated
// connections when the old password is removed, and keeps the last good credentials
// while the files cannot be read.
func TestCredentialsReadPerConnection(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := srv.Client()
	setUser := func(passwords ...string) {
		t.Helper()
		args := []any{"ACL", "SETUSER", "rot", "reset", "on", "~*", "+ping", "+client|id"}
		for _, p := range passwords {
			args = append(args, ">"+p)
		}
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setUser("old-password")
	k := newKubeletDir(t, map[string]string{"username": "rot", "password": "old-password"})
	c, err := NewClient(Options{Mode: ModeStandalone, Addrs: []string{srv.Addr()}, CredentialsPath: k.dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	first, err := c.Do(ctx, "CLIENT", "ID").Int64()
	if err != nil {
		t.Fatalf("old password: %v", err)
	}

	setUser("old-password", "new-password")                                      // the manager adds the new one,
	k.write(t, map[string]string{"username": "rot", "password": "new-password"}) // publishes it,
	setUser("new-password")                                                      // and removes the old one after the grace
	if id, err := c.Do(ctx, "CLIENT", "ID").Int64(); err != nil || id != first {
		t.Fatalf("the authenticated connection after the old password's removal: id %d (first %d), %v", id, first, err)
	}
	second := reconnect(ctx, t, srv, c, first)
	t.Logf("connection %d (old password) kept after its removal; new connection %d authenticated with the new one", first, second)

	if err := os.Remove(filepath.Join(k.dir, "..data")); err != nil { // files unreadable
		t.Fatal(err)
	}
	if id := reconnect(ctx, t, srv, c, second); id == second {
		t.Fatal("no new connection")
	}
}

// reconnect closes the user's connections on the server and returns the client's next
// connection id, which must be new: it authenticated with what the files say now.
func reconnect(ctx context.Context, t *testing.T, srv *redistest.Server, c redis.UniversalClient, old int64) int64 {
	t.Helper()
	if err := srv.Client().Do(ctx, "CLIENT", "KILL", "USER", "rot").Err(); err != nil {
		t.Fatal(err)
	}
	var id int64
	err := wait.Poll(5*time.Second, 20*time.Millisecond, func() error {
		var err error
		switch id, err = c.Do(ctx, "CLIENT", "ID").Int64(); {
		case err != nil && strings.Contains(err.Error(), "WRONGPASS"):
			return wait.Abort(fmt.Errorf("new connection refused: %w; the client did not read the new password", err))
		case err != nil:
			return err
		case id == old:
			return errors.New("still the old connection")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("no new connection: %v", err)
	}
	return id
}
