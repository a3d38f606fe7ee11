package operator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// ErrNotStopped is Stop's error when the manager did not return within 30 s.
var ErrNotStopped = errors.New("manager did not stop within 30s")

// Manager is one running manager with the operator's controllers.
type Manager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// Launch starts mgr in the background; WaitElected or WaitSynced wait for it, Stop stops it.
func Launch(mgr ctrl.Manager) *Manager {
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	return m
}

// WaitElected waits up to within until m is elected (at once without leader election). When
// m returns first, Stop has nothing left to wait for.
func (m *Manager) WaitElected(within time.Duration) error {
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-m.Elected():
		return nil
	case err := <-m.done:
		m.once.Do(m.cancel)
		return fmt.Errorf("manager exited before it was elected: %w", err)
	case <-timer.C:
		return fmt.Errorf("manager not elected within %s", within)
	}
}

// WaitSynced waits up to within until m is elected and its caches are synced; when it is
// not, it stops m.
func (m *Manager) WaitSynced(within time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := m.WaitElected(within); err != nil {
		return errors.Join(err, m.Stop())
	}
	if !m.GetCache().WaitForCacheSync(ctx) {
		return errors.Join(fmt.Errorf("manager caches did not sync within %s", within), m.Stop())
	}
	return nil
}

// Stop cancels the manager and waits (up to 30 s) for it to return; again, it returns the
// first outcome.
func (m *Manager) Stop() error {
	if m == nil {
		return nil
	}
	m.once.Do(func() {
		m.cancel()
		select {
		case err := <-m.done:
			if err != nil {
				m.err = fmt.Errorf("manager: %w", err)
			}
		case <-time.After(30 * time.Second):
			m.err = ErrNotStopped
		}
	})
	return m.err
}
