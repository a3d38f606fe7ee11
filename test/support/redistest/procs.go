package redistest

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// Procs owns redis-server processes started outside any test (a bench command, a TestMain).
// Close stops them all by their PIDs and removes their directories.
type Procs struct {
	tb *procTB
}

// NewProcs returns an empty Procs.
func NewProcs() *Procs { return &Procs{tb: &procTB{}} }

// Server starts a standalone redis-server on a free loopback port.
func (p *Procs) Server(opts ...Option) (s *Server, err error) {
	err = p.tb.do(func() { s = StartServer(p.tb, opts...) })
	return s, err
}

// Cluster starts a Redis Cluster of primaries primary nodes, the slots split evenly.
func (p *Procs) Cluster(primaries int, opts ...ClusterOption) (c *Cluster, err error) {
	err = p.tb.do(func() { c = StartCluster(p.tb, primaries, opts...) })
	return c, err
}

// Do runs fn with TB, turning a Fatalf or Skipf inside it into an error: for the helpers
// that take a testing.TB (StartReplicaVia, faultproxy.StartLink) outside a test.
func (p *Procs) Do(fn func(tb testing.TB)) error {
	return p.tb.do(func() { fn(p.tb) })
}

// TB is the testing.TB the processes are owned through, for other work of the same lifetime:
// its Cleanup runs at Close (last first), its Errorf makes Close fail, its Logf writes to
// stderr. Its Fatalf and Skipf panic outside Server, Cluster and Do.
func (p *Procs) TB() testing.TB { return p.tb }

// Close stops every process started so far (last first) and reports what went wrong.
func (p *Procs) Close() error {
	return p.tb.runCleanups()
}

// procTB lets this package own processes outside a test: Fatalf and Skipf end the
// current Procs call with an error instead of a test, Cleanup registers work for Close.
type procTB struct {
	testing.TB // nil: only satisfies the interface's unexported method

	mu       sync.Mutex
	cleanups []func()
	errs     []error
}

// abortTB is the panic value of Fatalf and Skipf, recovered by do.
type abortTB struct{ err error }

// do runs fn and turns a Fatalf or Skipf inside it into an error.
func (m *procTB) do(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			a, ok := r.(abortTB)
			if !ok {
				panic(r)
			}
			err = a.err
		}
	}()
	fn()
	return nil
}

func (m *procTB) Helper()      {}
func (m *procTB) Name() string { return "procs" }

func (m *procTB) Cleanup(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cleanups = append(m.cleanups, f)
}

func (m *procTB) Logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "redistest: "+format+"\n", args...)
}

func (m *procTB) Errorf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.errs = append(m.errs, fmt.Errorf(format, args...))
}

func (m *procTB) Error(args ...any) { m.Errorf("%s", fmt.Sprint(args...)) }

func (m *procTB) Fatalf(format string, args ...any) {
	panic(abortTB{err: fmt.Errorf(format, args...)})
}

func (m *procTB) Fatal(args ...any) { m.Fatalf("%s", fmt.Sprint(args...)) }

func (m *procTB) Skipf(format string, args ...any) {
	panic(abortTB{err: fmt.Errorf("skipped: "+format, args...)})
}

func (m *procTB) FailNow() { m.Fatalf("failed") }

func (m *procTB) Failed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.errs) > 0
}

// runCleanups runs the registered cleanups, last first, and returns the errors reported.
func (m *procTB) runCleanups() error {
	m.mu.Lock()
	fs := m.cleanups
	m.cleanups = nil
	m.mu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	err := errors.Join(m.errs...)
	m.errs = nil
	return err
}
