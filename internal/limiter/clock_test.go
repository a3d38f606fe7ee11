package limiter

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// sleepUntilWindowOffset sleeps until the Redis server clock is offset into a window of the
// given period (windows are aligned to the Unix epoch, as in the scripts), in the next window
// if the current one is already past it.
func sleepUntilWindowOffset(t testing.TB, rdb *redis.Client, period, offset time.Duration) {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	into := time.Duration(now.UnixNano()) % period
	wait := offset - into
	if wait <= 0 {
		wait += period
	}
	time.Sleep(wait)
}
