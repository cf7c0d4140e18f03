package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"rlproxy/internal/testutil/rlproxytest"
	"rlproxy/internal/testutil/waitfor"
)

// grpcService is a grpc-go TestService (grpc-go's interop protocol) that
// echoes payloads and counts the calls it served.
type grpcService struct {
	testgrpc.UnimplementedTestServiceServer
	empty atomic.Int64
}

func (s *grpcService) EmptyCall(context.Context, *testgrpc.Empty) (*testgrpc.Empty, error) {
	s.empty.Add(1)
	return &testgrpc.Empty{}, nil
}

func (s *grpcService) UnaryCall(_ context.Context, r *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	return &testgrpc.SimpleResponse{Payload: r.GetPayload()}, nil
}

func (s *grpcService) StreamingOutputCall(r *testgrpc.StreamingOutputCallRequest, st testgrpc.TestService_StreamingOutputCallServer) error {
	for _, p := range r.GetResponseParameters() {
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, p.GetSize())}}); err != nil {
			return err
		}
	}
	return nil
}

func (s *grpcService) StreamingInputCall(st testgrpc.TestService_StreamingInputCallServer) error {
	var n int32
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return st.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: n})
		}
		if err != nil {
			return err
		}
		n += int32(len(r.GetPayload().GetBody()))
	}
}

func (s *grpcService) FullDuplexCall(st testgrpc.TestService_FullDuplexCallServer) error {
	for {
		r, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := st.Send(&testgrpc.StreamingOutputCallResponse{Payload: r.GetPayload()}); err != nil {
			return err
		}
	}
}

// startGRPCUpstream serves a grpcService on a free port, over TLS with
// cert when it is set, else cleartext HTTP/2 (h2c).
func startGRPCUpstream(t *testing.T, cert *tls.Certificate) (*grpcService, string) {
	t.Helper()
	var opts []grpc.ServerOption
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	srv := grpc.NewServer(opts...)
	svc := &grpcService{}
	testgrpc.RegisterTestServiceServer(srv, svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return svc, ln.Addr().String()
}

// TestGRPCThroughProxy runs real grpc-go clients and servers through
// rlproxy over h2c→h2c, TLS→TLS and h2c→TLS: unary, server streaming,
// client streaming, and a bidi stream with a 2 s pause — longer than the
// 1 s server.body_timeout, which does not apply to gRPC streams. A limited
// route (2 calls per hour) refuses the 3rd call with ResourceExhausted
// and retry-after metadata; the upstream saw exactly 2.
func TestGRPCThroughProxy(t *testing.T) {
	e2eAwayFromBoundary(t, time.Hour, 30*time.Second)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	x := opsCert(t, certFile, keyFile, 1)
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(x)
	for _, tc := range []struct {
		name               string
		tlsFront, tlsUp    bool
		frontYAML, upProto string
	}{
		{name: "h2c-h2c", upProto: "protocol: h2c"},
		{name: "tls-tls", tlsFront: true, tlsUp: true},
		{name: "h2c-tls", tlsUp: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var upCert *tls.Certificate
			scheme := "http"
			if tc.tlsUp {
				upCert, scheme = &pair, "https"
			}
			svc, upAddr := startGRPCUpstream(t, upCert)
			front := "server: { h2c: true, body_timeout: 1s }\n"
			if tc.tlsFront {
				front = fmt.Sprintf("server: { body_timeout: 1s }\ntls: { cert_file: %q, key_file: %q }\n", certFile, keyFile)
			}
			upYAML := tc.upProto
			if tc.tlsUp {
				upYAML = fmt.Sprintf("ca_file: %q", certFile)
			}
			in := rlproxytest.Start(t, front+fmt.Sprintf(`
upstreams: { g: { url: "%s://%s", %s } }
policies: { two: { algorithm: fixed_window, limit: 2, window: 1h, key: ip } }
routes:
  - { name: limited, upstream: g, policies: [two], match: { path_prefix: /grpc.testing.TestService/EmptyCall } }
  - { name: open, upstream: g }
`, scheme, upAddr, upYAML))
			creds := insecure.NewCredentials()
			if tc.tlsFront {
				creds = credentials.NewClientTLSFromCert(pool, "")
			}
			addr := strings.TrimPrefix(strings.TrimPrefix(in.URL, "http://"), "https://")
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			grpcCalls(t, testgrpc.NewTestServiceClient(cc), svc)
		})
	}
}

// grpcCalls runs every kind of call through c and checks the limited
// route's refusal.
func grpcCalls(t *testing.T, c testgrpc.TestServiceClient, svc *grpcService) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	r, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hello")}})
	if err != nil || string(r.GetPayload().GetBody()) != "hello" {
		t.Fatalf("unary: %v %v", r, err)
	}
	so, err := c.StreamingOutputCall(ctx, &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}, {Size: 2}, {Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for {
		m, err := so.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("server streaming: %v", err)
			}
			break
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
	if fmt.Sprint(sizes) != "[1 2 3]" {
		t.Errorf("server streaming sizes %v, want [1 2 3]", sizes)
	}
	si, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 20, 30} {
		if err := si.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := si.CloseAndRecv(); err != nil || res.GetAggregatedPayloadSize() != 60 {
		t.Errorf("client streaming: %v %v, want 60", res, err)
	}
	bidi, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, msg := range []string{"one", "two"} {
		if i == 1 {
			time.Sleep(2 * time.Second) // quiet longer than body_timeout (1 s)
		}
		if err := bidi.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(msg)}}); err != nil {
			t.Fatalf("bidi send %q: %v", msg, err)
		}
		m, err := bidi.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != msg {
			t.Fatalf("bidi recv after %q: %v %v", msg, m, err)
		}
	}
	if err := bidi.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bidi.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("bidi end: %v, want EOF", err)
	}
	for i := range 3 {
		var hdr, trl metadata.MD
		_, err := c.EmptyCall(ctx, &testgrpc.Empty{}, grpc.Header(&hdr), grpc.Trailer(&trl))
		if i < 2 {
			if err != nil {
				t.Fatalf("limited call %d: %v", i+1, err)
			}
			continue
		}
		st := status.Convert(err)
		md := metadata.Join(hdr, trl)
		if st.Code() != codes.ResourceExhausted || len(md.Get("retry-after")) != 1 || len(md.Get("ratelimit")) != 1 {
			t.Errorf("3rd limited call: %v (%q), metadata %v; want ResourceExhausted with retry-after and ratelimit", st.Code(), st.Message(), md)
		}
	}
	if n := svc.empty.Load(); n != 2 {
		t.Errorf("upstream served %d limited calls, want 2", n)
	}
}

// TestGRPCConcurrencyLease: a `concurrency` lease is held for a bidi
// stream's whole life: with limit 1, a second stream is refused
// (ResourceExhausted) while the first is open, even quiet, and a third is
// served once the first has ended.
func TestGRPCConcurrencyLease(t *testing.T) {
	_, upAddr := startGRPCUpstream(t, nil)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true }
upstreams: { g: { url: "http://%s", protocol: h2c } }
policies: { one: { algorithm: concurrency, limit: 1, key: ip } }
routes: [ { name: r, upstream: g, policies: [one] } ]
`, upAddr))
	cc, err := grpc.NewClient(strings.TrimPrefix(in.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := testgrpc.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	echo := func(s testgrpc.TestService_FullDuplexCallClient, msg string) error {
		// A Send the server has already ended (rlproxy's trailers-only
		// refusal can beat it) returns io.EOF; the status is Recv's
		// (grpc-go's ClientStream.SendMsg contract).
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(msg)}}); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		_, err := s.Recv()
		return err
	}
	first, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(first, "a"); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // quiet, still open
	second, err := c.FullDuplexCall(ctx)
	if err == nil {
		err = echo(second, "b")
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Errorf("second stream while the first is open: %v, want ResourceExhausted", err)
	}
	if err := first.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := first.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("first stream end: %v", err)
	}
	// The lease is released when rlproxy's handler returns, just after
	// the client saw the end: retry briefly.
	waitfor.True(t, "a stream after the first ended", func() bool {
		third, err := c.FullDuplexCall(ctx)
		if err == nil {
			err = echo(third, "c")
			_ = third.CloseSend()
		}
		return err == nil
	})
}

// TestGRPCStreamIdleTimeout: server.stream_idle_timeout bounds a gRPC
// client's pause between two messages: a bidi stream quiet for 1.5 s
// under a 500 ms bound is ended, while one that keeps talking is not.
func TestGRPCStreamIdleTimeout(t *testing.T) {
	_, upAddr := startGRPCUpstream(t, nil)
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true, stream_idle_timeout: 500ms }
upstreams: { g: { url: "http://%s", protocol: h2c } }
routes: [ { name: r, upstream: g } ]
`, upAddr))
	cc, err := grpc.NewClient(strings.TrimPrefix(in.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := testgrpc.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var failed error
	for i, pause := range []time.Duration{0, 200 * time.Millisecond, 200 * time.Millisecond, 1500 * time.Millisecond} {
		time.Sleep(pause)
		if err := s.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte("m")}}); err != nil {
			failed = err
		} else if _, err := s.Recv(); err != nil {
			failed = err
		}
		if i < 3 && failed != nil {
			t.Fatalf("message %d after %v: %v", i, pause, failed)
		}
	}
	if failed == nil {
		t.Error("a stream quiet for 1.5 s survived stream_idle_timeout 500ms")
	}
}

// slowService answers UnaryCall after 2 s (no response header before).
type slowService struct {
	testgrpc.UnimplementedTestServiceServer
}

func (slowService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	return &testgrpc.SimpleResponse{}, nil
}

// TestGRPCOwnAnswers: rlproxy's own answers to gRPC calls are gRPC
// statuses with its messages: no route → Unimplemented, an unreachable
// upstream → Unavailable, an upstream past response_header_timeout →
// DeadlineExceeded.
func TestGRPCOwnAnswers(t *testing.T) {
	srv := grpc.NewServer()
	testgrpc.RegisterTestServiceServer(srv, slowService{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there any more
	in := rlproxytest.Start(t, fmt.Sprintf(`
server: { h2c: true }
upstreams:
  slow: { url: "http://%s", protocol: h2c, response_header_timeout: 300ms }
  dead: { url: "http://%s", protocol: h2c }
routes:
  - { name: slow, upstream: slow, match: { path_prefix: /grpc.testing.TestService/UnaryCall } }
  - { name: dead, upstream: dead, match: { path_prefix: /grpc.testing.TestService/EmptyCall } }
`, ln.Addr(), deadAddr))
	cc, err := grpc.NewClient(strings.TrimPrefix(in.URL, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := testgrpc.NewTestServiceClient(cc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type answer struct {
		what string
		err  error
		code codes.Code
		msg  string
	}
	_, slowErr := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	_, deadErr := c.EmptyCall(ctx, &testgrpc.Empty{})
	s, noRouteErr := c.StreamingInputCall(ctx)
	if noRouteErr == nil {
		_, noRouteErr = s.CloseAndRecv()
	}
	want := []answer{
		{"slow upstream", slowErr, codes.DeadlineExceeded, "the upstream did not answer in time"},
		{"unreachable upstream", deadErr, codes.Unavailable, "the upstream could not be reached or failed"},
		{"no route", noRouteErr, codes.Unimplemented, "no route matches this request"},
	}
	for _, w := range want {
		if st := status.Convert(w.err); st.Code() != w.code || st.Message() != w.msg {
			t.Errorf("%s: %v %q, want %v %q", w.what, st.Code(), st.Message(), w.code, w.msg)
		}
	}
}
