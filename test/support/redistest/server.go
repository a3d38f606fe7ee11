package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

const (
	// Host is the loopback address every server binds to.
	Host = "127.0.0.1"

	startTimeout   = 10 * time.Second // until a started server answers PING
	restartTimeout = 10 * time.Second // retrying a restart while its port is still busy
	stopGrace      = 5 * time.Second  // SIGTERM to exit, before SIGKILL
	killWait       = 5 * time.Second  // SIGKILL to exit
	pollInterval   = 20 * time.Millisecond
	startAttempts  = 5 // fresh ports tried when a picked port turns out to be taken
	logTailLines   = 30
)

// Option configures a server started by StartServer or, through WithNodeOptions, every node
// of a cluster.
type Option func(*config)

type config struct {
	args     []string
	password string
	cluster  bool
	env      []string // added to the process environment
}

// WithArgs appends extra redis-server command-line arguments, for example
// WithArgs("--maxmemory", "10mb"). They come after the harness defaults, so they override them.
func WithArgs(extra ...string) Option {
	return func(c *config) { c.args = append(c.args, extra...) }
}

// WithPassword makes the server require the password (--requirepass) for the default user.
// Clients from Server.Client and Server.Options authenticate with it.
func WithPassword(password string) Option {
	return func(c *config) { c.password = password }
}

// withCluster enables cluster mode on a private cluster bus port.
func withCluster() Option {
	return func(c *config) { c.cluster = true }
}

// Server is one redis-server process on loopback, owned by a test.
type Server struct {
	tb      testing.TB
	bin     string
	cfg     config
	dir     string
	port    int
	busPort int // cluster bus port, 0 when not in cluster mode

	mu      sync.Mutex
	proc    *process
	clients closers[*redis.Client]
}

// process is one run of redis-server; done is closed once it has exited and been reaped.
type process struct {
	cmd    *exec.Cmd
	output bytes.Buffer // stdout and stderr, readable once done is closed
	done   chan struct{}
	err    error
}

// StartServer starts a redis-server on 127.0.0.1 on a free port, in a private temporary
// directory, and waits until it answers PING. The server, its clients and its directory are
// removed when the test ends. It fails the test if the server cannot be started, and skips it
// (fails it under CI) when redis-server is not installed.
func StartServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{tb: t, bin: RequireRedis(t)}
	for _, o := range opts {
		o(&s.cfg)
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		t.Fatalf("redistest: create server dir: %v", err)
	}
	s.dir = dir
	t.Cleanup(s.cleanup)
	if err := s.startFresh(); err != nil {
		t.Fatalf("redistest: start redis-server: %v", err)
	}
	return s
}

// Addr returns the server's "127.0.0.1:port" address.
func (s *Server) Addr() string { return net.JoinHostPort(Host, strconv.Itoa(s.port)) }

// Port returns the server's TCP port; it stays the same across Restart.
func (s *Server) Port() int { return s.port }

// Dir returns the server's private working directory (holding redis.log and, in cluster
// mode, nodes.conf).
func (s *Server) Dir() string { return s.dir }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "redis.log") }

// PID returns the process ID of the current (or, once stopped, the last) redis-server process.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// Running reports whether the server process is currently alive.
func (s *Server) Running() bool {
	p := s.current()
	return p != nil && !p.exited()
}

// Options returns go-redis client options for this server, for tests that need to tune
// timeouts or retries. The caller owns and must close clients built from them.
func (s *Server) Options() *redis.Options {
	return &redis.Options{Addr: s.Addr(), Password: s.cfg.password}
}

// Client returns a new go-redis client for this server; it is closed when the test ends.
func (s *Server) Client() *redis.Client {
	return s.clients.add(redis.NewClient(s.Options()))
}

// Kill sends SIGKILL to the server's process and waits for it to exit. It does nothing if
// the server is not running.
func (s *Server) Kill() {
	s.tb.Helper()
	if err := s.stop(0); err != nil {
		s.tb.Errorf("redistest: kill %s: %v", s.Addr(), err)
	}
}

// Stop sends SIGTERM to the server's process, waits up to 5 s for it to exit, and then sends
// SIGKILL. It does nothing if the server is not running.
func (s *Server) Stop() {
	s.tb.Helper()
	if err := s.stop(stopGrace); err != nil {
		s.tb.Errorf("redistest: stop %s: %v", s.Addr(), err)
	}
}

// Freeze stops the server's process where it is (SIGSTOP by its PID) without closing a
// connection: clients and replicas see a server that answers nothing, as under a long
// stall; a frozen replica reads nothing of the replication stream. Thaw resumes it.
func (s *Server) Freeze() { s.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT by its PID).
func (s *Server) Thaw() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.tb.Helper()
	p := s.current()
	if p == nil || p.exited() {
		s.tb.Fatalf("redistest: %s: signal %v: not running", s.Addr(), sig)
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: %s: signal %v: %v", s.Addr(), sig, err)
	}
}

// Restart stops the server if it is still running and starts it again on the same port and
// directory (so a cluster node keeps its identity), then waits until it answers PING.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.stop(stopGrace); err != nil {
		t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
	err := wait.Poll(restartTimeout, 100*time.Millisecond, func() error {
		err := s.launchAndWait()
		if err != nil && !errors.Is(err, errPortInUse) {
			return wait.Abort(err)
		}
		return err
	})
	if err != nil {
		t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
	}
}

// cleanup closes the clients, stops the process by its PID and removes the directory.
func (s *Server) cleanup() {
	s.clients.closeAll()
	if err := s.stop(stopGrace); err != nil {
		s.tb.Errorf("redistest: stop %s: %v", s.Addr(), err)
		return // keep the directory for inspection
	}
	if err := os.RemoveAll(s.dir); err != nil {
		s.tb.Errorf("redistest: remove %s: %v", s.dir, err)
	}
}

var errPortInUse = errors.New("port already in use")

// startFresh picks free ports and starts the server, retrying with new ports when another
// process grabbed a picked port before redis-server could bind it.
func (s *Server) startFresh() error {
	var err error
	for range startAttempts {
		if err = s.pickPorts(); err != nil {
			return err
		}
		if err = s.resetDir(); err != nil {
			return err
		}
		if err = s.launchAndWait(); !errors.Is(err, errPortInUse) {
			return err
		}
	}
	return fmt.Errorf("%d attempts: %w", startAttempts, err)
}

// pickPorts chooses the client port and, in cluster mode, the cluster bus port.
func (s *Server) pickPorts() error {
	var err error
	if s.port, err = freePort(); err != nil {
		return err
	}
	if s.cfg.cluster {
		if s.busPort, err = freePort(); err != nil {
			return err
		}
	}
	return nil
}

// resetDir empties the server directory, dropping files from a failed earlier attempt.
func (s *Server) resetDir() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read server dir: %w", err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(s.dir, e.Name())); err != nil {
			return fmt.Errorf("reset server dir: %w", err)
		}
	}
	return nil
}

// args returns the redis-server command line.
func (s *Server) args() []string {
	a := []string{
		"--bind", Host,
		"--port", strconv.Itoa(s.port),
		"--protected-mode", "yes",
		"--save", "",
		"--appendonly", "no",
		"--daemonize", "no",
		"--dir", s.dir,
		"--logfile", s.LogPath(),
		"--repl-diskless-sync-delay", "0",
	}
	if s.cfg.password != "" {
		a = append(a, "--requirepass", s.cfg.password, "--masterauth", s.cfg.password)
	}
	if s.cfg.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
			"--cluster-port", strconv.Itoa(s.busPort),
		)
	}
	return append(a, s.cfg.args...)
}

// launchAndWait starts a redis-server process and waits until it answers PING. It returns an
// error wrapping errPortInUse when the process exited because its port was taken.
func (s *Server) launchAndWait() error {
	logOffset := fileSize(s.LogPath())
	p, err := s.launch()
	if err != nil {
		return err
	}
	err = s.waitReady(p)
	if err == nil {
		return nil
	}
	if stopErr := stopProcess(p, 0); stopErr != nil {
		err = errors.Join(err, stopErr)
	}
	log := readFrom(s.LogPath(), logOffset)
	if strings.Contains(log, "Address already in use") {
		err = fmt.Errorf("%w: %w", errPortInUse, err)
	}
	output := "(still running)"
	if p.exited() {
		output = strings.TrimSpace(p.output.String())
	}
	return fmt.Errorf("%s (dir %s): %w\n--- output ---\n%s\n--- log tail ---\n%s",
		s.Addr(), s.dir, err, output, tailFile(s.LogPath(), logTailLines))
}

// launch starts the redis-server process and a goroutine that reaps it.
func (s *Server) launch() (*process, error) {
	p := &process{cmd: exec.Command(s.bin, s.args()...), done: make(chan struct{})}
	p.cmd.Dir = s.dir
	if len(s.cfg.env) > 0 {
		p.cmd.Env = append(os.Environ(), s.cfg.env...)
	}
	p.cmd.Stdout = &p.output
	p.cmd.Stderr = &p.output
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", s.bin, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	return p, nil
}

// waitReady polls PING until the server answers, the process exits, or startTimeout passes.
func (s *Server) waitReady(p *process) error {
	opts := s.Options()
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = time.Second, time.Second, time.Second
	opts.MaxRetries, opts.PoolSize = -1, 1
	c := redis.NewClient(opts)
	defer func() { _ = c.Close() }()
	return wait.Poll(startTimeout, pollInterval, func() error {
		if p.exited() {
			return wait.Abort(fmt.Errorf("redis-server exited: %w", p.err))
		}
		// Probe the port first: go-redis logs every failed dial, which is noise here.
		conn, err := net.DialTimeout("tcp", s.Addr(), time.Second)
		if err != nil {
			return fmt.Errorf("dial: %w", err)
		}
		_ = conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return c.Ping(ctx).Err()
	})
}

// current returns the latest process, or nil if none was started.
func (s *Server) current() *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// stop ends the current process: SIGTERM first when grace > 0, SIGKILL after grace.
func (s *Server) stop(grace time.Duration) error {
	p := s.current()
	if p == nil {
		return nil
	}
	return stopProcess(p, grace)
}

// stopProcess signals p by its PID and waits for it to exit: SIGTERM and up to grace when
// grace > 0, then SIGKILL.
func stopProcess(p *process, grace time.Duration) error {
	if p.exited() {
		return nil
	}
	pid := p.cmd.Process.Pid
	// A frozen process (Freeze) handles no SIGTERM until it runs again.
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	if grace > 0 {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("SIGTERM pid %d: %w", pid, err)
		}
		if p.wait(grace) {
			return nil
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL pid %d: %w", pid, err)
	}
	if !p.wait(killWait) {
		return fmt.Errorf("pid %d still running %s after SIGKILL", pid, killWait)
	}
	return nil
}

// exited reports whether the process has exited and been reaped.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit and reports whether it did.
func (p *process) wait(d time.Duration) bool { return wait.Closed(p.done, d) }

// closers are the clients a Server or Cluster handed out, closed when the test ends.
type closers[C io.Closer] struct {
	mu   sync.Mutex
	list []C
}

// add keeps c for closeAll and returns it.
func (cs *closers[C]) add(c C) C {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	cs.list = append(cs.list, c)
	return c
}

// closeAll closes every client kept so far.
func (cs *closers[C]) closeAll() {
	cs.mu.Lock()
	list := cs.list
	cs.list = nil
	cs.mu.Unlock()
	for _, c := range list {
		_ = c.Close()
	}
}

var (
	portsMu   sync.Mutex
	portsUsed = map[int]bool{} // ports handed out by this test binary; never reused
)

// freePort returns a loopback TCP port that was free a moment ago and that no other server
// of this test binary has used.
func freePort() (int, error) {
	for range 100 {
		port, err := wait.FreePort()
		if err != nil {
			return 0, err
		}
		portsMu.Lock()
		taken := portsUsed[port]
		portsUsed[port] = true
		portsMu.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: every port offered was already used")
}

// fileSize returns the size of the file at path, or 0 if it cannot be read.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns the file's content from offset on, or "" if it cannot be read.
func readFrom(path string, offset int64) string {
	data, err := os.ReadFile(path)
	if err != nil || offset > int64(len(data)) {
		return ""
	}
	return string(data[offset:])
}
