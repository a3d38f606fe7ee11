// Package h2grpc is a lean gRPC client for load generation: unary calls over one HTTP/2
// connection, written with golang.org/x/net/http2's Framer, with each request's bytes
// (HPACK header block and length-prefixed message) encoded once before the run.
//
// The bench commands stand it in for Envoy, a C++ client, so that the CPU the generator
// spends on a call (it shares the machine with the sidecar and Redis) is small next to
// the sidecar's. grpc-go's client took about 40% of the bench process's CPU, more than the
// sidecar's handler and limiter together; this one, decoding every answer included, about
// a quarter. It is not a general client: no TLS, no compression, no retries, no per-stream flow control
// (responses must fit the initial 64 KiB stream window, as rate limit responses do).
package h2grpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Request is one call's bytes, encoded once by Encode and sent any number of times.
type Request struct {
	headers []byte // HPACK block, self-contained (no dynamic table entries)
	message []byte // gRPC length-prefixed message
}

// Encode prepares a unary call of method (/package.Service/Method) on authority with the
// marshalled message msg. Every field is a "never indexed" literal, so the block leaves the
// server's HPACK table alone and can be sent again unchanged.
func Encode(authority, method string, msg []byte) Request {
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{
		{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", authority},
		{"content-type", "application/grpc"}, {"te", "trailers"},
	} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1], Sensitive: true}) // writes to a bytes.Buffer
	}
	m := make([]byte, 5+len(msg)) // flag 0 (not compressed), 4-byte big-endian length, message
	binary.BigEndian.PutUint32(m[1:], uint32(len(msg)))
	copy(m[5:], msg)
	return Request{headers: hb.Bytes(), message: m}
}

// Response is what a call received.
type Response struct {
	Status  int    // grpc-status (0 OK)
	Message []byte // the response message, without its 5-byte prefix; nil without one
}

// Conn is one HTTP/2 connection carrying concurrent calls. Safe for concurrent use.
type Conn struct {
	nc net.Conn
	bw *bufio.Writer
	fr *http2.Framer
	// wmu serialises writes; writers counts callers writing or waiting to, and the last one
	// out flushes, so concurrent calls share a write system call.
	wmu     sync.Mutex
	writers atomic.Int32
	nextID  uint32 // under wmu
	mu      sync.Mutex
	streams map[uint32]*stream // under mu
	err     error              // under mu: set once the connection failed
	unacked uint32             // connection-level bytes received and not yet returned (reader only)
}

type stream struct {
	resp Response
	err  error // set when the stream or the connection failed
	done chan struct{}
}

// Dial connects to a gRPC server on addr (cleartext HTTP/2 with prior knowledge).
func Dial(addr string) (*Conn, error) {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Conn{nc: nc, bw: bufio.NewWriterSize(nc, 32<<10), nextID: 1, streams: map[uint32]*stream{}}
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 32<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = 1 << 20
	if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("preface: %w", err)
	}
	if err := errors.Join(c.fr.WriteSettings(), c.bw.Flush()); err != nil {
		_ = nc.Close()
		return nil, fmt.Errorf("settings: %w", err)
	}
	go c.read()
	return c, nil
}

// Close closes the connection; calls in flight fail.
func (c *Conn) Close() error { return c.nc.Close() }

// Call sends req and waits for its response.
func (c *Conn) Call(req Request) (Response, error) {
	s := &stream{done: make(chan struct{})}
	if err := c.send(req, s); err != nil {
		return Response{}, err
	}
	<-s.done
	if s.err != nil {
		return Response{}, s.err
	}
	return s.resp, nil
}

func (c *Conn) send(req Request, s *stream) error {
	c.writers.Add(1)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	last := c.writers.Add(-1) == 0 // no other caller waits to write: flush
	id := c.nextID
	c.nextID += 2
	c.mu.Lock()
	err := c.err
	if err == nil {
		c.streams[id] = s
	}
	c.mu.Unlock()
	if err != nil {
		return err
	}
	err = errors.Join(
		c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: req.headers, EndHeaders: true}),
		c.fr.WriteData(id, true, req.message))
	if err == nil && last {
		err = c.bw.Flush()
	}
	if err != nil {
		c.fail(fmt.Errorf("write: %w", err))
	}
	return nil // a failed write fails the stream through fail
}

// read runs the connection's frames until it fails.
func (c *Conn) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err == nil {
			err = c.handle(f)
		}
		if err != nil {
			c.fail(err)
			return
		}
	}
}

func (c *Conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		c.headers(f)
	case *http2.DataFrame:
		return c.data(f)
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return c.control(func() error { return c.fr.WriteSettingsAck() })
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			return c.control(func() error { return c.fr.WritePing(true, f.Data) })
		}
	case *http2.RSTStreamFrame:
		c.finish(f.StreamID, func(s *stream) { s.err = fmt.Errorf("stream %d reset: %v", f.StreamID, f.ErrCode) })
	case *http2.GoAwayFrame:
		return fmt.Errorf("goaway: %v", f.ErrCode)
	}
	return nil
}

// headers handles response headers; those ending the stream are the trailers.
func (c *Conn) headers(f *http2.MetaHeadersFrame) {
	if !f.StreamEnded() {
		return
	}
	var err error
	status, convErr := strconv.Atoi(headerValue(f, "grpc-status"))
	if v := f.PseudoValue("status"); v != "" && v != "200" {
		err = fmt.Errorf("stream %d: HTTP status %s", f.StreamID, v)
	} else if convErr != nil {
		err = fmt.Errorf("stream %d: no grpc-status in the trailers", f.StreamID)
	}
	c.finish(f.StreamID, func(s *stream) { s.resp.Status, s.err = status, err })
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.RegularFields() {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// data keeps a response message and returns the connection window it used.
func (c *Conn) data(f *http2.DataFrame) error {
	if p := f.Data(); len(p) >= 5 {
		msg := append([]byte(nil), p[5:]...)
		c.mu.Lock()
		if s := c.streams[f.StreamID]; s != nil {
			s.resp.Message = msg
		}
		c.mu.Unlock()
	}
	if c.unacked += f.Length; c.unacked >= 16<<10 {
		n := c.unacked
		c.unacked = 0
		return c.control(func() error { return c.fr.WriteWindowUpdate(0, n) })
	}
	return nil
}

// control writes a connection-level frame and flushes it.
func (c *Conn) control(write func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return errors.Join(write(), c.bw.Flush())
}

// finish completes stream id after set has filled in its response.
func (c *Conn) finish(id uint32, set func(*stream)) {
	c.mu.Lock()
	s := c.streams[id]
	delete(c.streams, id)
	c.mu.Unlock()
	if s != nil {
		set(s)
		close(s.done)
	}
}

// fail ends the connection: every call in flight, and every later one, fails with err.
func (c *Conn) fail(err error) {
	if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
		err = fmt.Errorf("connection closed: %w", err)
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	pending := c.streams
	c.streams = map[uint32]*stream{}
	c.mu.Unlock()
	for _, s := range pending {
		s.err = err
		close(s.done)
	}
	_ = c.nc.Close()
}
