package redisbackend

import (
	"context"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/redisconn"
)

// TestOptionsKey: a connection is rebuilt when what reaches Redis changes (addresses, TLS,
// its CA, whether it authenticates), not when only the password does (new connections read
// it).
func TestOptionsKey(t *testing.T) {
	creds := func(context.Context) (string, string, error) { return "u", "p", nil }
	base := redisconn.Options{Mode: redisconn.ModeStandalone, Addrs: []string{"r:6379"}, Credentials: creds}
	key := optionsKey(base)
	same := base
	same.Credentials = func(context.Context) (string, string, error) { return "u", "rotated", nil }
	if optionsKey(same) != key {
		t.Error("another credentials provider changed the key")
	}
	for name, edit := range map[string]func(o *redisconn.Options){
		"addrs":   func(o *redisconn.Options) { o.Addrs = []string{"s:6379"} },
		"db":      func(o *redisconn.Options) { o.DB = 1 },
		"tls":     func(o *redisconn.Options) { o.TLS.Enabled = true },
		"ca":      func(o *redisconn.Options) { o.TLS.Enabled, o.TLS.CA = true, []byte("pem") },
		"no auth": func(o *redisconn.Options) { o.Credentials = nil },
	} {
		o := base
		edit(&o)
		if optionsKey(o) == key {
			t.Errorf("a change of %s kept the key", name)
		}
	}
}
