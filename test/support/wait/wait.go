// Package wait is what tests wait with: polling a condition until it holds (Poll, and
// Eventually and Consistently for a test), and free loopback ports for the servers they
// start (FreePort, FreeAddr). It imports only the standard library, so any test can use it.
package wait

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// Context is a context that times out after d and is cancelled when the test ends.
func Context(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// abortError makes Poll give up at once instead of retrying.
type abortError struct{ err error }

func (e abortError) Error() string { return e.err.Error() }
func (e abortError) Unwrap() error { return e.err }

// Abort wraps err so that Poll returns it (unwrapped) at once instead of retrying: for a
// check that knows waiting longer cannot help (the process it waits for has exited).
func Abort(err error) error { return abortError{err: err} }

// ErrNotYet is a check's answer while its condition does not hold and it has nothing more
// specific to say.
var ErrNotYet = errors.New("not yet")

// Poll calls check every interval until it returns nil, returns an error from Abort, or
// timeout passes; then it returns the last error from check, naming the timeout.
func Poll(timeout, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		var ab abortError
		if errors.As(err, &ab) {
			return ab.err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s: %w", timeout, err)
		}
		time.Sleep(interval)
	}
}

// Eventually calls check every 50ms until it returns nil, and fails the test with what and
// the last error when it has not within timeout (or at once on an error from Abort).
func Eventually(t testing.TB, timeout time.Duration, what string, check func() error) {
	t.Helper()
	if err := Poll(timeout, 50*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Cond turns a condition into a check for Poll: nil while it holds, ErrNotYet otherwise.
func Cond(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return ErrNotYet
	}
}

// Until is Eventually for a condition without an error to tell.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, Cond(cond))
}

// Consistently calls check every 100ms for d and fails the test at the first error.
func Consistently(t testing.TB, d time.Duration, what string, check func() error) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
}

// Closed waits up to d for done to be closed and reports whether it was.
func Closed(done <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
		return true
	case <-timer.C:
		return false
	}
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// FreeAddr returns a loopback address, 127.0.0.1:port, whose port was free a moment ago; it
// fails the test when there is none.
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
}

// FreeAddrs returns n distinct loopback addresses whose ports were free a moment ago: the
// listeners are held open until all n are chosen, so two of them cannot be the same port
// handed out twice (as n calls of FreeAddr can).
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("find a free port: %v", err)
		}
		defer func() { _ = l.Close() }()
		out = append(out, l.Addr().String())
	}
	return out
}

// ErrExited is how a process that has exited is reported to HTTPStatus (see Exit).
var ErrExited = errors.New("exited")

// Exit is ErrExited with how the process exited (the error of exec.Cmd.Wait, nil for
// status 0).
func Exit(err error) error {
	if err == nil {
		return ErrExited
	}
	return fmt.Errorf("%w: %w", ErrExited, err)
}

// Answers is nil when one GET of url through c answers want, else why not.
func Answers(c *http.Client, url string, want int) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != want {
		return fmt.Errorf("answered %s", resp.Status)
	}
	return nil
}

// HTTPStatus polls url with GET (through c, or a client with a 2s timeout when c is nil)
// every 100ms until it answers want. It fails the test after timeout, or as soon as gone
// returns an error: gone says whether the server's process has exited (nil while it runs;
// Exit otherwise).
func HTTPStatus(t testing.TB, c *http.Client, url string, want int, timeout time.Duration, gone func() error) {
	t.Helper()
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	err := Poll(timeout, 100*time.Millisecond, func() error {
		if err := gone(); err != nil {
			return Abort(err)
		}
		return Answers(c, url, want)
	})
	if err != nil {
		t.Fatalf("%s did not answer %d: %v", url, want, err)
	}
}
