package h2grpc

import (
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// serve starts a real grpc-go server with the health service on loopback.
func serve(t *testing.T) (addr string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("up", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(s, hs)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String(), s.Stop
}

func checkRequest(t *testing.T, addr, service string) Request {
	t.Helper()
	msg, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		t.Fatal(err)
	}
	return Encode(addr, "/grpc.health.v1.Health/Check", msg)
}

func dial(t *testing.T, addr string) *Conn {
	t.Helper()
	c, err := Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestConcurrentCalls sends many calls at once on one connection, reusing the same encoded
// requests, and wants every answer right: the server's HPACK state and the connection window
// must survive far more response bytes than the initial 64 KiB window.
func TestConcurrentCalls(t *testing.T) {
	addr, _ := serve(t)
	c := dial(t, addr)
	up, unknown := checkRequest(t, addr, "up"), checkRequest(t, addr, "nope")
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 64 {
		wg.Go(func() {
			for i := range 300 {
				req, wantStatus := up, codes.OK
				if (g+i)%5 == 0 {
					req, wantStatus = unknown, codes.NotFound // the health service's answer for an unknown service
				}
				r, err := c.Call(req)
				if err != nil {
					errs <- err.Error()
					return
				}
				if r.Status != int(wantStatus) {
					errs <- "status " + codes.Code(r.Status).String() + ", want " + wantStatus.String()
					return
				}
				if wantStatus != codes.OK {
					continue
				}
				var resp healthpb.HealthCheckResponse
				if err := proto.Unmarshal(r.Message, &resp); err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
					errs <- "bad response " + resp.String()
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestUnknownMethod gets gRPC's UNIMPLEMENTED from a trailers-only response.
func TestUnknownMethod(t *testing.T) {
	addr, _ := serve(t)
	c := dial(t, addr)
	r, err := c.Call(Encode(addr, "/no.Such/Method", nil))
	if err != nil {
		t.Fatal(err)
	}
	if codes.Code(r.Status) != codes.Unimplemented || r.Message != nil {
		t.Errorf("got status %d, message %q; want UNIMPLEMENTED without a message", r.Status, r.Message)
	}
}

// TestServerGone fails calls, in flight and later, instead of hanging.
func TestServerGone(t *testing.T) {
	addr, stop := serve(t)
	c := dial(t, addr)
	req := checkRequest(t, addr, "up")
	if _, err := c.Call(req); err != nil {
		t.Fatal(err)
	}
	stop()
	done := make(chan error, 1)
	go func() {
		var err error
		for err == nil { // the first calls may still be answered while the server closes
			_, err = c.Call(req)
		}
		done <- err
	}()
	select {
	case err := <-done:
		t.Logf("after the server stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("calls still succeed or hang 10s after the server stopped")
	}
}
