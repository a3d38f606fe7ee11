package gateways_test

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/proc"
	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// bindAttempts bounds how often a process is started again on fresh ports when a port chosen
// free was taken before it bound it (by another test package running at the same time).
const bindAttempts = 3

// startOnFreePorts starts the process cmd builds for n loopback ports chosen free together,
// halted when the test ends, and waits until ready says it serves them. A start that loses a
// port in between (the process exits saying the address is in use) is made again on new
// ports; ready answering while the process is gone (another process holds the port) counts
// as such a loss.
func startOnFreePorts(t *testing.T, name string, n int, cmd func(addrs []string) *exec.Cmd,
	ready func(addrs []string) error) (addrs []string, halt func()) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		addrs = wait.FreeAddrs(t, n)
		p := proc.Start(t, name, cmd(addrs))
		halt = func() { p.Halt(5 * time.Second) }
		t.Cleanup(halt)
		err := wait.Poll(startWait, 100*time.Millisecond, func() error {
			if err := p.Gone(); err != nil {
				return wait.Abort(err)
			}
			return ready(addrs)
		})
		if err == nil {
			time.Sleep(200 * time.Millisecond) // a process that failed to bind exits at once
			err = p.Gone()
		}
		switch {
		case err == nil:
			return addrs, halt
		case attempt < bindAttempts && strings.Contains(strings.ToLower(p.Out.String()), "address already in use"):
			t.Logf("%s start %d lost a port chosen free (%v); again on new ports", name, attempt, err)
			halt()
		default:
			t.Fatalf("%s not serving %v: %v\n%s", name, addrs, err, p.Out.String())
		}
	}
}

// listening is a ready check: the first address accepts connections.
func listening(addrs []string) error {
	c, err := net.DialTimeout("tcp", addrs[0], time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}
