package redisconn_test

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

// flagOptions are the options the command-line flags args set, as the operator parses them.
func flagOptions(t *testing.T, args ...string) redisconn.Options {
	t.Helper()
	var o redisconn.Options
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	o.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

// checkRefusal fails the test unless err is nil when want is empty, or contains want.
func checkRefusal(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("valid flags refused: %v", err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("want an error containing %q, got %v", want, err)
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		args    []string
		wantErr string // empty: valid
	}{
		{nil, ""},
		{[]string{"--redis-addrs", "r:6379"}, ""},
		{[]string{"--redis-mode", "cluster", "--redis-addrs", "a:1, b:2,,c:3"}, ""},
		{[]string{"--redis-mode", "sentinel", "--redis-master-name", "m", "--redis-addrs", "s1:26379,s2:26379"}, ""},
		{[]string{"--redis-mode", "bogus"}, "--redis-mode"},
		{[]string{"--redis-addrs", "a:1,b:2"}, "--redis-addrs"},
		{[]string{"--redis-addrs", "nohost"}, "--redis-addrs"},
		{[]string{"--redis-mode", "sentinel"}, "--redis-master-name"},
		{[]string{"--redis-mode", "cluster", "--redis-db", "1"}, "--redis-db"},
		{[]string{"--redis-db", "-1"}, "--redis-db"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			o := flagOptions(t, c.args...)
			checkRefusal(t, o.Validate(), c.wantErr)
		})
	}
}

func TestValidateDefaultsAddr(t *testing.T) {
	o := redisconn.Options{Mode: redisconn.ModeStandalone}
	if err := o.Validate(); err != nil || len(o.Addrs) != 1 || o.Addrs[0] != "127.0.0.1:6379" {
		t.Fatalf("default endpoint: %v %v", o.Addrs, err)
	}
}

func TestLoadCredentials(t *testing.T) {
	c, err := redisconn.LoadCredentials(redistest.SecretDir(t, map[string]string{"username": "limiter\n", "password": "s3cret\n"}))
	if err != nil || c.Username != "limiter" || c.Password != "s3cret" {
		t.Fatalf("got %+v, %v", c, err)
	}
	c, err = redisconn.LoadCredentials(redistest.SecretDir(t, map[string]string{"password": "only"}))
	if err != nil || c.Username != "" || c.Password != "only" {
		t.Fatalf("password only: got %+v, %v", c, err)
	}
	if _, err := redisconn.LoadCredentials(redistest.SecretDir(t, map[string]string{"username": "u"})); err == nil ||
		!strings.Contains(err.Error(), "password") {
		t.Fatalf("missing password file: want an error naming it, got %v", err)
	}
}

// TestNewClientStandaloneWithAuth reaches a real password-protected redis-server with the
// credentials read from a Secret-shaped directory, and is refused without them.
func TestNewClientStandaloneWithAuth(t *testing.T) {
	redistest.RequireRedis(t)
	srv := redistest.StartServer(t, redistest.WithPassword("pa55"))
	ctx := context.Background()

	anon := newClient(t, redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()}})
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("ping without credentials: want NOAUTH, got %v", err)
	}

	dir := redistest.SecretDir(t, map[string]string{"password": "pa55"})
	c := newClient(t, redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{srv.Addr()}, CredentialsPath: dir})
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping with credentials: %v", err)
	}
}

// TestNewClientCluster routes keys of three slots through a real 3-primary Cluster.
func TestNewClientCluster(t *testing.T) {
	redistest.RequireRedis(t)
	cl := redistest.StartCluster(t, 3)
	c := newClient(t, redisconn.Options{Mode: redisconn.ModeCluster, Addrs: cl.Addrs()[:1]})
	ctx := context.Background()
	for _, k := range []string{"{a}", "{b}", "{c}"} {
		if err := c.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatalf("set %s through seed %s: %v", k, cl.Addrs()[0], err)
		}
		if v, err := c.Get(ctx, k).Result(); err != nil || v != k {
			t.Fatalf("get %s: %q %v", k, v, err)
		}
	}
}
