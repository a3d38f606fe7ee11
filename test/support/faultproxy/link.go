package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Link is a byte-level TCP relay on loopback, for a replica's link to its primary: unlike
// Proxy it parses nothing, since the replication stream is not request and reply. Hold
// stops forwarding what the primary sends, so the replica lags for real: it neither
// applies nor acknowledges the writes, and what was held is lost when the primary dies
// (a frozen replica would still find them in its socket buffer). Release resumes.
type Link struct {
	ln     net.Listener
	target string
	held   atomic.Bool
	done   chan struct{}
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
}

// StartLink starts a link to the server at target on a free loopback port; it is closed
// when the test ends.
func StartLink(tb testing.TB, target string) *Link {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("faultproxy: link listen: %v", err)
	}
	l := &Link{ln: ln, target: target, done: make(chan struct{})}
	l.wg.Go(l.accept)
	tb.Cleanup(l.Close)
	return l
}

// Addr is the link's own "127.0.0.1:port" address.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Port is the port of Addr.
func (l *Link) Port() int { return l.ln.Addr().(*net.TCPAddr).Port } //nolint:forcetypeassert // a TCP listener

// Hold stops forwarding from the target: bytes it sends stay unread until Release.
func (l *Link) Hold() { l.held.Store(true) }

// Release forwards from the target again.
func (l *Link) Release() { l.held.Store(false) }

// Close stops accepting, closes every connection (dropping what was held) and waits.
func (l *Link) Close() {
	select {
	case <-l.done:
		return
	default:
	}
	close(l.done)
	_ = l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *Link) accept() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		l.wg.Go(func() { l.serve(c) })
	}
}

// serve relays one connection: everything from the client, and from the target unless held.
func (l *Link) serve(client net.Conn) {
	server, err := net.Dial("tcp", l.target)
	if err != nil {
		_ = client.Close()
		return
	}
	if !l.track(client, server) {
		return
	}
	defer func() { _ = client.Close(); _ = server.Close() }()
	go func() { _, _ = io.Copy(server, client); _ = server.Close() }()
	_ = l.fromTarget(server, client)
}

// fromTarget copies server to client. Bytes read once the link is held are kept, not
// forwarded, until Release: nothing the target sends after Hold returns reaches the client.
func (l *Link) fromTarget(server, client net.Conn) error {
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		if l.held.Load() {
			select {
			case <-l.done:
				return nil
			case <-time.After(time.Millisecond):
				continue
			}
		}
		if len(pending) > 0 {
			if _, err := client.Write(pending); err != nil {
				return fmt.Errorf("link write: %w", err)
			}
			pending = nil
		}
		_ = server.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
		n, err := server.Read(buf)
		if n > 0 {
			if l.held.Load() {
				pending = append(pending, buf[:n]...)
			} else if _, werr := client.Write(buf[:n]); werr != nil {
				return fmt.Errorf("link write: %w", werr)
			}
		}
		var ne net.Error
		if err != nil && (!errors.As(err, &ne) || !ne.Timeout()) {
			return fmt.Errorf("link read: %w", err)
		}
	}
}

// track records both ends for Close; false when the link is closing (both are closed).
func (l *Link) track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.done:
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	default:
	}
	l.conns = append(l.conns, conns...)
	return true
}
