package httpserver

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// progress sets a connection's deadlines from the client's progress: before each read of
// the request body the read deadline is now+read, before each write of the answer the write
// deadline is now+write.
type progress struct {
	next        http.Handler
	read, write time.Duration
}

// ServeHTTP serves one request with progress deadlines.
func (p *progress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := &deadlines{rc: http.NewResponseController(w)}
	defer d.finish(p.write)
	if p.write > 0 {
		w = &progressWriter{ResponseWriter: w, d: d, timeout: p.write}
	}
	if p.read > 0 && r.Body != nil && r.Body != http.NoBody {
		// Only with a body: without one the server is already reading the connection in
		// the background (without a deadline) to notice a client that goes away, and a
		// deadline would end that read and cancel the request.
		d.setRead(time.Now().Add(p.read)) // also bounds the server discarding an unread body
		body := &progressBody{ReadCloser: r.Body, d: d, timeout: p.read}
		// A copy (the server keeps its own Body) whose context finds the body for Stalled,
		// also from requests derived from this one with another Body.
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
		r.Body = body
	}
	p.next.ServeHTTP(w, r)
}

// deadlines sets one request's connection deadlines until the handler returns or hijacks
// the connection; after that the connection is the server's (or the hijacker's) again.
type deadlines struct {
	mu   sync.Mutex
	rc   *http.ResponseController
	done bool
}

func (d *deadlines) setRead(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.done {
		_ = d.rc.SetReadDeadline(t) // fails only on a closed connection, which fails the read anyway
	}
}

func (d *deadlines) setWrite(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.done {
		_ = d.rc.SetWriteDeadline(t) // as in setRead
	}
}

// finish bounds the server's final flush of the answer (when write is set) and stops
// setting deadlines.
func (d *deadlines) finish(write time.Duration) {
	if write > 0 {
		d.setWrite(time.Now().Add(write))
	}
	d.stop()
}

func (d *deadlines) stop() {
	d.mu.Lock()
	d.done = true
	d.mu.Unlock()
}

// bodyKey is the context key of a request's progressBody.
type bodyKey struct{}

// progressBody sets the read deadline before each read of the body, and clears it at the
// end of the body: the server then reads the connection in the background, for as long as
// the handler takes. After a failed read the deadline stays: it also bounds the server's
// discarding of the rest of the body once the handler returns.
type progressBody struct {
	io.ReadCloser
	d       *deadlines
	timeout time.Duration
	stalled atomic.Bool
	reading atomic.Int64 // the deadline (unix ns) of the read in progress, 0 between reads
	eof     atomic.Bool  // the body has ended: the server's background read owns the deadline
}

// Read reads more of the body within the timeout.
func (b *progressBody) Read(p []byte) (int, error) {
	if b.eof.Load() {
		return b.ReadCloser.Read(p)
	}
	deadline := time.Now().Add(b.timeout)
	b.reading.Store(deadline.UnixNano())
	b.d.setRead(deadline)
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
		b.d.setRead(time.Time{})
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.stalled.Store(true)
	}
	b.reading.Store(0)
	return n, err
}

// Stalled reports whether reading the body of r (or of the request r was derived from)
// failed because the client sent nothing more
// within the read timeout (NewStreaming): the handler's failure is the client's doing. It
// also holds while the timed-out read is still returning (the server cancels the request's
// context from inside it, so a proxy may report its failure first).
func Stalled(r *http.Request) bool {
	b, ok := r.Context().Value(bodyKey{}).(*progressBody)
	if !ok {
		return false
	}
	deadline := b.reading.Load()
	return b.stalled.Load() || deadline != 0 && time.Now().UnixNano() >= deadline
}

// progressWriter sets the write deadline before each write and flush.
type progressWriter struct {
	http.ResponseWriter
	d       *deadlines
	timeout time.Duration
}

// Write writes more of the answer within the timeout.
func (w *progressWriter) Write(p []byte) (int, error) {
	w.d.setWrite(time.Now().Add(w.timeout))
	return w.ResponseWriter.Write(p)
}

// FlushError flushes within the timeout (http.ResponseController uses it).
func (w *progressWriter) FlushError() error {
	w.d.setWrite(time.Now().Add(w.timeout))
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack hands the connection over without deadlines: an upgraded connection (WebSocket)
// is the hijacker's to bound.
func (w *progressWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.d.stop()
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		_ = conn.SetDeadline(time.Time{}) // a closed connection fails its first use anyway
	}
	return conn, brw, err
}

// Unwrap is the server's writer, for http.ResponseController.
func (w *progressWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
