package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server this command started on loopback; stop kills it by its PID.
type server struct {
	cmd  *exec.Cmd
	dir  string
	port int
}

func startServer() (*server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pick a port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "ratelimit-bench-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	cmd := exec.Command("redis-server", "--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", dir+"/redis.log")
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &server{cmd: cmd, dir: dir, port: port}
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
	defer func() { _ = c.Close() }()
	for range 200 {
		if c.Ping(context.Background()).Err() == nil {
			return s, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	s.stop()
	return nil, fmt.Errorf("redis-server on port %d did not answer", port)
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(s.dir)
}
