// Package faultproxy is a TCP proxy on loopback for fault tests against real Redis servers.
// A Proxy forwards each client connection to one Redis server, command by command, and breaks
// the commands a Fault selects in one of three ways: it drops the connection before the
// command reaches Redis, drops it after Redis has run the command and replied (the reply is
// lost), or holds the reply back for a while. It counts what it forwarded, so a test can tell
// from both sides how often a command ran.
//
// The proxy relays one command at a time: it forwards a command, reads Redis's complete reply
// (RESP2 or RESP3) and passes it on before it forwards the next. A client's pipeline still
// works (its replies come back in order), only without overlapping on the way to Redis; and
// a fault hits exactly one command, with the commands after it in the same pipeline never
// forwarded. Out-of-band RESP3 pushes (client tracking, pub/sub) are not supported.
package faultproxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ratelimit-dev/ratelimit-operator/test/support/wait"
)

// Action is what a Fault does to a command it selects.
type Action int

const (
	// DropBefore closes the client's connection without forwarding the command: Redis never
	// sees it.
	DropBefore Action = iota + 1
	// DropAfter forwards the command, waits for Redis's reply, discards it and closes the
	// client's connection: the command ran, and the client never learns its outcome.
	DropAfter
	// Delay forwards the command and holds Redis's reply back for Fault.Delay before passing
	// it on (a client that gave up meanwhile has usually closed the connection).
	Delay
)

// String is the action's name.
func (a Action) String() string {
	switch a {
	case DropBefore:
		return "DropBefore"
	case DropAfter:
		return "DropAfter"
	case Delay:
		return "Delay"
	default:
		return fmt.Sprintf("Action(%d)", int(a))
	}
}

// Fault selects commands to break and says how.
type Fault struct {
	// Action is what happens to a selected command.
	Action Action
	// Commands are the command names selected (case-insensitive); empty selects every command.
	Commands []string
	// Arg, when set, selects only commands with an argument equal to it (a key, say).
	Arg string
	// Count is how many commands the fault breaks before it is spent; 0 means every selected
	// command until Clear.
	Count int
	// Delay is how long Delay holds a reply back.
	Delay time.Duration
}

// dialTimeout bounds the proxy's own connection to Redis.
const dialTimeout = 5 * time.Second

// Proxy is a fault-injecting TCP proxy in front of one Redis server. Safe for concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	done   chan struct{}
	wg     sync.WaitGroup

	mu        sync.Mutex
	faults    []*Fault
	hits      int
	forwarded map[string]int
	conns     map[net.Conn]struct{}
	closed    bool
}

// Start starts a proxy for the Redis server at target on a free loopback port; it is closed
// when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := Listen(target)
	if err != nil {
		tb.Fatalf("faultproxy: %v", err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Listen starts a proxy for target on a free loopback port. Close it when done.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for a proxy to %s: %w", target, err)
	}
	p := &Proxy{target: target, ln: ln, done: make(chan struct{}), forwarded: map[string]int{},
		conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's own "127.0.0.1:port" address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target is the address of the Redis server behind the proxy.
func (p *Proxy) Target() string { return p.target }

// Inject adds a fault; faults are tried in the order they were added.
func (p *Proxy) Inject(f Fault) {
	f.Commands = slices.Clone(f.Commands)
	for i, c := range f.Commands {
		f.Commands[i] = strings.ToUpper(c)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, &f)
}

// Clear removes every fault.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Hits is how many commands faults have broken so far.
func (p *Proxy) Hits() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits
}

// Forwarded is how many commands named name (case-insensitive) the proxy has forwarded to
// Redis, whether or not their reply reached the client.
func (p *Proxy) Forwarded(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.forwarded[strings.ToUpper(name)]
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	if err != nil {
		return fmt.Errorf("close proxy listener: %w", err)
	}
	return nil
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

// track registers an open connection; false once the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	_ = c.Close()
}

// serve relays one client connection to a connection of its own to Redis.
func (p *Proxy) serve(client net.Conn) {
	defer p.untrack(client)
	ctx, cancel := context.WithTimeout(context.Background(), dialTimeout)
	server, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.target)
	cancel()
	if err != nil {
		return // the client sees its connection closed, as if Redis were down
	}
	if !p.track(server) {
		_ = server.Close()
		return
	}
	defer p.untrack(server)
	cr, sr := bufio.NewReader(client), bufio.NewReader(server)
	for {
		if err := p.relay(cr, client, sr, server); err != nil {
			return
		}
	}
}

// errDropped ends a connection a fault dropped.
var errDropped = errors.New("dropped by a fault")

// relay passes one command to Redis and its reply back, applying the fault that selects it.
func (p *Proxy) relay(cr *bufio.Reader, client net.Conn, sr *bufio.Reader, server net.Conn) error {
	cmd, args, err := readCommand(cr)
	if err != nil {
		return err
	}
	if len(args) == 0 {
		return errors.New("empty command")
	}
	name := args[0]
	f := p.take(args)
	if f != nil && f.Action == DropBefore {
		return errDropped
	}
	if _, err := server.Write(cmd); err != nil {
		return fmt.Errorf("forward %s: %w", name, err)
	}
	p.count(name)
	reply, err := readReply(sr)
	if err != nil {
		return fmt.Errorf("reply to %s: %w", name, err)
	}
	switch {
	case f == nil:
	case f.Action == DropAfter:
		return errDropped
	case f.Action == Delay:
		if !p.sleep(f.Delay) {
			return errDropped
		}
	}
	if _, err := client.Write(reply); err != nil {
		return fmt.Errorf("reply to %s: %w", name, err)
	}
	return nil
}

// take returns the first fault that selects the command args (name first) and spends one
// of its hits, or nil.
func (p *Proxy) take(args []string) *Fault {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		if !f.selects(args) {
			continue
		}
		p.hits++
		if f.Count > 0 {
			if f.Count--; f.Count == 0 {
				p.faults = slices.Delete(p.faults, i, i+1)
			}
		}
		return f
	}
	return nil
}

// selects reports whether f applies to the command args (name first).
func (f *Fault) selects(args []string) bool {
	if len(f.Commands) > 0 && !slices.Contains(f.Commands, args[0]) {
		return false
	}
	return f.Arg == "" || slices.Contains(args[1:], f.Arg)
}

func (p *Proxy) count(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forwarded[name]++
}

// sleep waits d, or less if the proxy closes; it reports whether it waited all of d.
func (p *Proxy) sleep(d time.Duration) bool { return !wait.Closed(p.done, d) }
