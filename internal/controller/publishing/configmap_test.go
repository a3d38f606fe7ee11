package publishing

import (
	"slices"
	"testing"

	"github.com/ratelimit-dev/ratelimit-operator/internal/snapshot"
)

// TestRedisPlaceDiffers: a namespace moved when its snapshot names another backend or the
// same one pointed at other addresses (its counters start fresh either way); not when only
// the functions flag or TLS changed.
func TestRedisPlaceDiffers(t *testing.T) {
	base := redisPlace{backend: "isolated", redis: snapshot.Redis{Mode: "standalone", Addrs: []string{"a:6379"}}}
	for name, c := range map[string]struct {
		edit func(*redisPlace)
		want bool
	}{
		"nothing":     {func(*redisPlace) {}, false},
		"functions":   {func(p *redisPlace) { p.redis.Functions, p.redis.TLS = true, true }, false},
		"backend":     {func(p *redisPlace) { p.backend = "" }, true},
		"addresses":   {func(p *redisPlace) { p.redis.Addrs = []string{"b:6379"} }, true},
		"database":    {func(p *redisPlace) { p.redis.DB = 2 }, true},
		"master name": {func(p *redisPlace) { p.redis.Mode, p.redis.MasterName = "sentinel", "m" }, true},
	} {
		p := base
		p.redis.Addrs = slices.Clone(base.redis.Addrs)
		c.edit(&p)
		if got := base.differs(p); got != c.want {
			t.Errorf("%s: differs %v, want %v", name, got, c.want)
		}
	}
	if got := base.String(); got != "RedisBackend isolated (a:6379)" {
		t.Errorf("String %q", got)
	}
}
