package app

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/ratelimit-dev/ratelimit-operator/internal/sidecar/engine"
)

// Health answers the probes. The sidecar is ready once it holds a good snapshot and Redis has
// answered once, or the snapshot holds no policy (nothing to ask Redis); after that a Redis
// outage does not make it unready (the failure modes are what decide then, and pulling every
// pod out of its Service would turn a Redis outage into a full one). Draining makes it
// unready so endpoints stop sending before shutdown.
type Health struct {
	// Store holds the snapshot.
	Store *engine.Store
	// Log receives the first Redis answer and probe failures.
	Log logr.Logger

	ping     atomic.Pointer[func(context.Context) error]
	redisOK  atomic.Bool
	draining atomic.Bool
}

var errNoPing = errors.New("no redis client yet")

// SetPing gives the probe its way to ask Redis, once the client exists.
func (h *Health) SetPing(ping func(ctx context.Context) error) { h.ping.Store(&ping) }

// WaitForRedis pings every interval until Redis answers or ctx ends.
func (h *Health) WaitForRedis(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, interval)
		err := errNoPing
		if ping := h.ping.Load(); ping != nil {
			err = (*ping)(pctx)
		}
		cancel()
		if err == nil {
			h.redisOK.Store(true)
			h.Log.Info("redis answered")
			return
		}
		h.Log.V(1).Info("redis not answering yet", "error", err.Error())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Drain marks the sidecar unready for good.
func (h *Health) Drain() { h.draining.Store(true) }

// Ready reports readiness and, when not ready, why.
func (h *Health) Ready() (bool, string) {
	switch {
	case h.draining.Load():
		return false, "shutting down"
	case h.Store.Current() == nil:
		return false, "no good policy snapshot loaded yet"
	case len(h.Store.Current().Rules) == 0:
		return true, "ok: no policy applies"
	case !h.redisOK.Load():
		return false, "redis has not answered yet"
	}
	return true, "ok"
}

// Readyz serves /readyz.
func (h *Health) Readyz(w http.ResponseWriter, _ *http.Request) {
	ok, why := h.Ready()
	if !ok {
		http.Error(w, why, http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok\n")) // the prober may be gone
}

// healthz serves /healthz: the process is alive and serving.
func healthz(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }
