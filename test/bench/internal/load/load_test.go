package load

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

func TestDrive(t *testing.T) {
	s, err := Drive(context.Background(), 4, 50*time.Millisecond, func(_ context.Context, g int, _ *rand.Rand) (Outcome, error) {
		time.Sleep(time.Millisecond)
		return Outcome(g % 3), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.Calls == 0 || s.Admitted+s.Denied+s.Fallbacks != s.Calls || s.Admitted == 0 || s.Denied == 0 || s.Fallbacks == 0 ||
		s.P50 < time.Millisecond || s.P99 < s.P50 || s.PerSec <= 0 {
		t.Errorf("Drive = %+v", s)
	}
	boom := errors.New("boom")
	if _, err := Drive(context.Background(), 2, time.Second, func(context.Context, int, *rand.Rand) (Outcome, error) {
		return Fallback, boom
	}); !errors.Is(err, boom) {
		t.Errorf("Drive with a failing caller: %v, want boom", err)
	}
}

func TestMedian(t *testing.T) {
	got := Median([]Stats{{PerSec: 3, P99: 9, Fallbacks: 0}, {PerSec: 1, P99: 7, Fallbacks: 2}, {PerSec: 2, P99: 8}})
	if got.PerSec != 2 || got.P99 != 8 || got.Fallbacks != 2 {
		t.Errorf("Median = %+v, want rate 2, p99 8, fallbacks 2 (the most)", got)
	}
	if got := MedianOf([]int{4, 1, 3, 2}, func(i int) int { return i }); got != 2 {
		t.Errorf("MedianOf(even) = %d, want the lower middle 2", got)
	}
	if got := Median(nil); got != (Stats{}) {
		t.Errorf("Median(nil) = %+v", got)
	}
}
