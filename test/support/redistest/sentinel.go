package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// StartReplica starts a server that replicates primary and waits (up to 30 s) until its
// link to the primary is up. It is stopped by its PID when the test ends.
func StartReplica(t testing.TB, primary *Server, opts ...Option) *Server {
	t.Helper()
	return StartReplicaVia(t, primary.Port(), opts...)
}

// StartReplicaVia is StartReplica of the primary reached at Host:port, which may be a relay
// in front of it (faultproxy.Link).
func StartReplicaVia(t testing.TB, port int, opts ...Option) *Server {
	t.Helper()
	r := StartServer(t, opts...)
	primary := net.JoinHostPort(Host, strconv.Itoa(port))
	if _, err := do(r, "REPLICAOF", Host, port); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	err := wait.Poll(formTimeout, formPollInterval, func() error {
		info, err := text(r, "INFO", "replication")
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return fmt.Errorf("%s: link to %s not up yet", r.Addr(), primary)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("redistest: replica of %s: %v", primary, err)
	}
	return r
}

// Sentinel is a redis-server in Sentinel mode on loopback, owned by a test.
type Sentinel struct {
	addr string
	dir  string
	proc *process
}

// StartSentinel starts a Sentinel monitoring primary as masterName with quorum 1 and a
// down-after of 1 s, and waits (up to 30 s) until it lists the primary's replicas that are
// already attached (start replicas first). It is stopped by its PID when the test ends.
func StartSentinel(t testing.TB, masterName string, primary *Server) *Sentinel {
	t.Helper()
	bin := RequireRedis(t)
	port, err := freePort()
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Sentinel{addr: net.JoinHostPort(Host, strconv.Itoa(port)), dir: t.TempDir()}
	conf := filepath.Join(s.dir, "sentinel.conf")
	text := fmt.Sprintf("bind %s\nport %d\ndir %s\nlogfile %s\nsentinel monitor %s %s %d 1\n"+
		"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
		Host, port, s.dir, filepath.Join(s.dir, "sentinel.log"), masterName, Host, primary.Port(), masterName, masterName)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.proc = &process{cmd: exec.Command(bin, conf, "--sentinel"), done: make(chan struct{})}
	s.proc.cmd.Stdout, s.proc.cmd.Stderr = &s.proc.output, &s.proc.output
	if err := s.proc.cmd.Start(); err != nil {
		t.Fatalf("redistest: start sentinel: %v", err)
	}
	go func() {
		s.proc.err = s.proc.cmd.Wait()
		close(s.proc.done)
	}()
	t.Cleanup(func() {
		if err := stopProcess(s.proc, stopGrace); err != nil {
			t.Errorf("redistest: stop sentinel %s: %v", s.addr, err)
		}
	})
	if err := s.waitKnown(masterName, primary); err != nil {
		t.Fatalf("redistest: sentinel %s: %v\n%s", s.addr, err, tailFile(filepath.Join(s.dir, "sentinel.log"), logTailLines))
	}
	return s
}

// Addr is the Sentinel's "127.0.0.1:port".
func (s *Sentinel) Addr() string { return s.addr }

// Client returns a new Sentinel client; the caller closes it.
func (s *Sentinel) Client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.addr})
}

// waitKnown waits until the Sentinel names primary and sees up as many replicas as primary
// reports connected.
func (s *Sentinel) waitKnown(masterName string, primary *Server) error {
	sc := s.Client()
	defer func() { _ = sc.Close() }()
	return wait.Poll(formTimeout, formPollInterval, func() error {
		if s.proc.exited() {
			return wait.Abort(fmt.Errorf("sentinel exited: %w\n%s", s.proc.err, s.proc.output.String()))
		}
		ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
		defer cancel()
		addr, err := sc.GetMasterAddrByName(ctx, masterName).Result()
		if err != nil {
			return err
		}
		if len(addr) != 2 || addr[1] != strconv.Itoa(primary.Port()) {
			return fmt.Errorf("names %v as %s", addr, masterName)
		}
		replicas, err := sc.Replicas(ctx, masterName).Result()
		if err != nil {
			return err
		}
		up := 0
		for _, r := range replicas {
			if !strings.Contains(r["flags"], "down") && !strings.Contains(r["flags"], "disconnected") {
				up++
			}
		}
		info, err := text(primary, "INFO", "replication")
		if err != nil {
			return err
		}
		if want := "connected_slaves:" + strconv.Itoa(up); !strings.Contains(info, want+"\r\n") {
			return fmt.Errorf("sees %d replicas up (of %d listed), the primary reports otherwise", up, len(replicas))
		}
		return nil
	})
}
