package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/hack/controlplane"
)

// The demo runs Redis as a production install would with per-namespace users: the default
// user off, the manager as the documented administrative user (config/redis/acl.conf), and
// each namespace's sidecar as the user the manager made for it.

const (
	adminUser    = "ratelimit-admin"
	secondNS     = "-b" // the second namespace is the demo's namespace + this
	credsSecret  = "ratelimit-redis-credentials"
	secretWait   = 30 * time.Second
	adminACLFile = "config/redis/acl.conf"
)

// redisUserArgs are redis-server's arguments declaring the users: default off, and the
// administrative user of config/redis/acl.conf with password.
func redisUserArgs(password string) ([]string, error) {
	src, err := os.ReadFile(filepath.Join(controlplane.RepoRoot(), adminACLFile))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", adminACLFile, err)
	}
	for _, line := range strings.Split(string(src), "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "user" || f[1] != adminUser {
			continue
		}
		rules := make([]string, 0, len(f))
		for _, r := range f[2:] {
			if strings.HasPrefix(r, "#") {
				r = ">" + password // the placeholder hash: the demo's own password
			}
			rules = append(rules, r)
		}
		return append([]string{"--user", "default", "off", "--user", adminUser}, rules...), nil
	}
	return nil, fmt.Errorf("%s has no %s user", adminACLFile, adminUser)
}

// newPassword is a random password for the demo's administrative user.
func newPassword() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// writeCreds writes username and password files as a mounted basic-auth Secret has them.
func writeCreds(dir, username, password string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("credentials dir: %w", err)
	}
	for name, v := range map[string]string{"username": username, "password": password} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
			return fmt.Errorf("credentials %s: %w", name, err)
		}
	}
	return nil
}

// namespaceCreds waits for the Secret the manager writes in ns and mounts it (as files in
// a directory of the demo's, the way the kubelet would) for that namespace's sidecar.
func (d *demo) namespaceCreds(ctx context.Context, ns string) (dir, user, password string, err error) {
	deadline := time.Now().Add(secretWait)
	for {
		user, err = d.kubectl(ctx, nil, "get", "secret", credsSecret, "-n", ns, "-o", "jsonpath={.data.username}")
		if err == nil && user != "" {
			break
		}
		if time.Now().After(deadline) {
			return "", "", "", fmt.Errorf("no Secret %s in %s after %s: %s", credsSecret, ns, secretWait, user)
		}
		time.Sleep(200 * time.Millisecond)
	}
	pass, err := d.kubectl(ctx, nil, "get", "secret", credsSecret, "-n", ns, "-o", "jsonpath={.data.password}")
	if err != nil {
		return "", "", "", fmt.Errorf("read Secret %s/%s: %w", ns, credsSecret, err)
	}
	u, err1 := base64.StdEncoding.DecodeString(user)
	p, err2 := base64.StdEncoding.DecodeString(pass)
	if err := errors.Join(err1, err2); err != nil {
		return "", "", "", fmt.Errorf("decode Secret %s/%s: %w", ns, credsSecret, err)
	}
	dir = filepath.Join(d.dir, "creds-"+ns)
	return dir, string(u), string(p), writeCreds(dir, string(u), string(p))
}

// tenancy shows each namespace with its own Redis user: a second namespace gets a policy
// and its own user; with the first namespace's credentials, the second's keys are refused.
func (d *demo) tenancy(ctx context.Context) error {
	other := d.opts.namespace + secondNS
	d.step("Tenancy: namespaces " + d.opts.namespace + " and " + other + " each get their own Redis user")
	if out, err := d.kubectl(ctx, nil, "create", "namespace", other); err != nil {
		return fmt.Errorf("kubectl create namespace %s: %w\n%s", other, err, out)
	}
	if out, err := d.kubectl(ctx, demoPolicy, "apply", "-n", other, "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply -n %s: %w\n%s", other, err, out)
	}
	if _, _, _, err := d.namespaceCreds(ctx, other); err != nil {
		return err
	}
	users, err := d.redisUsers(ctx)
	if err != nil {
		return err
	}
	for _, u := range users {
		d.say("ACL user %s", u)
	}
	refused, err := d.crossRead(ctx, other)
	if err != nil {
		return err
	}
	d.say("as %s's user, reading %s's key: %s", d.opts.namespace, other, refused)
	d.done(fmt.Sprintf("tenancy: %s and %s have their own Redis users; %s's credentials are refused %s's keys",
		d.opts.namespace, other, d.opts.namespace, other))
	return nil
}

// redisUsers lists the per-namespace users as Redis holds them, passwords left out.
func (d *demo) redisUsers(ctx context.Context) ([]string, error) {
	c := redis.NewClient(&redis.Options{Addr: d.addrs.redis, Username: adminUser, Password: d.adminPassword})
	defer func() { _ = c.Close() }()
	list, err := c.Do(ctx, "ACL", "LIST").StringSlice()
	if err != nil {
		return nil, fmt.Errorf("ACL LIST: %w", err)
	}
	var out []string
	for _, line := range list {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[1], "ratelimit-ns-") {
			continue
		}
		var keep []string
		for _, r := range f[1:] {
			if !strings.HasPrefix(r, "#") {
				keep = append(keep, r)
			}
		}
		out = append(out, strings.Join(keep, " "))
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("want a Redis user per namespace, ACL LIST has %q", list)
	}
	return out, nil
}

// crossRead reads, with the first namespace's credentials, its own key and a key of other,
// and tries to run a script of its own; it returns Redis's two refusals.
func (d *demo) crossRead(ctx context.Context, other string) (string, error) {
	c := redis.NewClient(&redis.Options{Addr: d.addrs.redis, Username: d.nsUser, Password: d.nsPassword})
	defer func() { _ = c.Close() }()
	own := "{rl:" + d.opts.namespace + "/demo-api:alice}:per-10s"
	if err := c.GetRange(ctx, own, 0, 31).Err(); err != nil {
		return "", fmt.Errorf("own key %s: %w", own, err)
	}
	theirs := "{rl:" + other + "/demo-api:alice}:per-10s"
	read, err := refusal(c.GetRange(ctx, theirs, 0, 31).Err(), "reading "+theirs+" as "+d.nsUser)
	if err != nil {
		return "", err
	}
	script, err := refusal(c.Eval(ctx, "return 1", nil).Err(), "EVAL as "+d.nsUser)
	if err != nil {
		return "", err
	}
	return read + "; EVAL of a script of its own: " + script, nil
}

// refusal is err's text when it is Redis's NOPERM, else an error about what.
func refusal(err error, what string) (string, error) {
	switch {
	case err == nil:
		return "", fmt.Errorf("%s was allowed, want NOPERM", what)
	case !strings.Contains(err.Error(), "NOPERM"):
		return "", fmt.Errorf("%s: %w, want NOPERM", what, err)
	}
	return err.Error(), nil
}
