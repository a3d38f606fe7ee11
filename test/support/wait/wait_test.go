package wait

import (
	"errors"
	"net"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	errBusy := errors.New("busy")
	t.Run("retries until nil", func(t *testing.T) {
		n := 0
		if err := Poll(time.Second, time.Millisecond, func() error {
			if n++; n < 3 {
				return errBusy
			}
			return nil
		}); err != nil || n != 3 {
			t.Fatalf("err %v after %d calls; want nil after 3", err, n)
		}
	})
	t.Run("returns the last error after the timeout", func(t *testing.T) {
		start := time.Now()
		err := Poll(30*time.Millisecond, time.Millisecond, func() error { return errBusy })
		if !errors.Is(err, errBusy) || time.Since(start) < 30*time.Millisecond {
			t.Fatalf("err %v after %s; want busy after 30ms", err, time.Since(start))
		}
	})
	t.Run("gives up at once on Abort", func(t *testing.T) {
		n := 0
		err := Poll(time.Minute, time.Millisecond, func() error { n++; return Abort(errBusy) })
		if err != errBusy || n != 1 { //nolint:errorlint // Abort's error comes back unwrapped
			t.Fatalf("err %v after %d calls; want busy itself after 1", err, n)
		}
	})
	t.Run("Cond", func(t *testing.T) {
		if Cond(func() bool { return true })() != nil || !errors.Is(Cond(func() bool { return false })(), ErrNotYet) {
			t.Fatal("Cond: want nil for true, ErrNotYet for false")
		}
	})
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	_ = l.Close()
}
