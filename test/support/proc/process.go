package proc

import (
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Process is a binary a test started with Start.
type Process struct {
	// Cmd is the started command.
	Cmd *exec.Cmd
	// Out holds what the process wrote to stderr, and to stdout unless Start was given a
	// command with Stdout set.
	Out *Buffer

	name   string
	exited chan struct{}
	err    error // how it exited; set before exited is closed
}

// Start starts cmd as name (a word for messages: "manager"), its output into Out. When the
// test ends a process still running is killed and waited for, and Out is logged if the test
// failed.
func Start(t testing.TB, name string, cmd *exec.Cmd) *Process {
	t.Helper()
	p, err := Launch(name, cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("%s output:\n%s", name, p.Out.String())
		}
	})
	return p
}

// Launch is Start for a program that is not a test (a bench): the caller stops the process
// (Halt) when it is done with it.
func Launch(name string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{Cmd: cmd, Out: &Buffer{}, name: name, exited: make(chan struct{})}
	if cmd.Stdout == nil {
		cmd.Stdout = p.Out
	}
	cmd.Stderr = p.Out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Gone is nil while the process runs, and how it exited once it has (wait.Exit): the check
// wait.HTTPStatus makes between its polls.
func (p *Process) Gone() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s %w", p.name, wait.Exit(p.err))
	default:
		return nil
	}
}

// Stop sends SIGTERM and returns how the process exited; it fails the test when the signal
// cannot be sent or the process does not exit within timeout.
func (p *Process) Stop(t testing.TB, timeout time.Duration) error {
	t.Helper()
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("SIGTERM %s: %v", p.name, err)
	}
	select {
	case <-p.exited:
		return p.err
	case <-time.After(timeout):
		t.Fatalf("%s did not stop within %s of SIGTERM", p.name, timeout)
		return nil
	}
}

// Halt stops the process as an orchestrator does: SIGTERM, then SIGKILL when it has not
// exited within grace. It waits for the exit and never fails the test; a process that has
// exited already is left as it is.
func (p *Process) Halt(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.exited
	}
}
