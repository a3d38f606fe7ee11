package redisconn

import (
	"context"
	"flag"
	"strings"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/redistest"
)

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
			var o Options
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			o.BindFlags(fs)
			if err := fs.Parse(c.args); err != nil {
				t.Fatalf("parse: %v", err)
			}
			err := o.Validate()
			switch {
			case c.wantErr == "" && err != nil:
				t.Fatalf("valid flags refused: %v", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
				t.Fatalf("want an error naming %s, got %v", c.wantErr, err)
			}
		})
	}
}

func TestValidateDefaultsAddr(t *testing.T) {
	o := Options{Mode: ModeStandalone}
	if err := o.Validate(); err != nil || len(o.Addrs) != 1 || o.Addrs[0] != "127.0.0.1:6379" {
		t.Fatalf("default endpoint: %v %v", o.Addrs, err)
	}
}

func TestLoadCredentials(t *testing.T) {
	c, err := LoadCredentials(redistest.SecretDir(t, map[string]string{"username": "limiter\n", "password": "s3cret\n"}))
	if err != nil || c.Username != "limiter" || c.Password != "s3cret" {
		t.Fatalf("got %+v, %v", c, err)
	}
	c, err = LoadCredentials(redistest.SecretDir(t, map[string]string{"password": "only"}))
	if err != nil || c.Username != "" || c.Password != "only" {
		t.Fatalf("password only: got %+v, %v", c, err)
	}
	if _, err := LoadCredentials(redistest.SecretDir(t, map[string]string{"username": "u"})); err == nil ||
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

	anon, err := NewClient(Options{Mode: ModeStandalone, Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = anon.Close() }()
	if err := anon.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("ping without credentials: want NOAUTH, got %v", err)
	}

	dir := redistest.SecretDir(t, map[string]string{"password": "pa55"})
	c, err := NewClient(Options{Mode: ModeStandalone, Addrs: []string{srv.Addr()}, CredentialsPath: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping with credentials: %v", err)
	}
}

// TestNewClientCluster routes keys of three slots through a real 3-primary Cluster.
func TestNewClientCluster(t *testing.T) {
	redistest.RequireRedis(t)
	cl := redistest.StartCluster(t, 3)
	c, err := NewClient(Options{Mode: ModeCluster, Addrs: cl.Addrs()[:1]})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
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
