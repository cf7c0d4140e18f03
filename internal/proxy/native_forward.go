package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"strings"

	"rlproxy/internal/h1"
	upstreampkg "rlproxy/internal/upstream"
)

// The engine's path to the upstream: the request head written from the
// client's bytes with the proxy's edits (requestEdits: what rewrite and
// headerEdit do on the std path), the body streamed, the server chosen by
// the upstream's Trip (balancer, health, breaker, retries of a request
// that may go again), the response head written back with the quota
// fields, its body streamed and its trailer passed.

// errSwitch is an upstream's 101 to a request that asked for no switch
// (its Upgrade was never forwarded): a bad answer, 502.
var errSwitch = errors.New("upstream switched protocols unasked")

// attemptFailure is how one attempt failed before a response head.
type attemptFailure struct {
	err      error
	blame    upstreampkg.Blame
	bodyRead bool // some of the request's body was taken: it cannot go again
}

// forwardH1 sends r to up and streams the answer back. It reports
// whether the response ended normally (the admission then settles it);
// rlproxy's own answer to a failure (502, 504, 400, 408) is written here.
func (s *Server) forwardH1(n *nativeCall, w *h1.ResponseWriter, r *h1.Request, rt *Runtime, up *upstream) bool {
	nr := up.native
	up.pool.Begin(&n.trip, &n.rc.up, &n.rc.view)
	n.requestEdits(rt, nr)
	for {
		srv, err := n.trip.Next()
		if err != nil {
			s.answerUpstreamH1(n, w, up, err)
			return false
		}
		if nr.hostUpstream {
			n.set[0].Value = srv.Host()
		}
		u, resp, f := n.send(w, r, nr, srv.Addr())
		if f.err == nil {
			n.trip.Responded(resp.Status)
			ok, err := n.respond(w, r, rt, up, u, resp)
			n.trip.Done()
			if n.cut {
				u.Discard()
			} else {
				u.Release(err)
			}
			return ok
		}
		retry, final := n.trip.Failed(f.err, f.blame, false, upstreampkg.Retriable(r.Method(), f.bodyRead, f.err))
		if !retry {
			s.answerUpstreamH1(n, w, up, final)
			return false
		}
	}
}

// send makes one attempt at addr: a connection from the pool, the head,
// the body, the response head (1xx forwarded). A reused connection found
// stale (stray bytes, a close) before anything was sent on it is replaced
// by another; so is one the upstream closed as a body-less idempotent
// request's head went out (as the std path's direct transport does for
// GET and HEAD). Another request is not sent twice: the upstream may have
// acted on it (nginx's proxy_next_upstream, non_idempotent off).
func (n *nativeCall) send(w *h1.ResponseWriter, r *h1.Request, nr *nativeRoute, addr string) (*h1.UpstreamConn, *h1.Response, attemptFailure) {
	for {
		u, reused, err := nr.pool.Get(context.Background(), addr)
		if err != nil {
			return nil, nil, attemptFailure{err: err}
		}
		bw, err := u.WriteHead(h1.AppendRequest(u.Scratch(), r, r.Target(), &n.edits), r.Framing)
		read := err == nil && r.Framing != h1.NoBody
		if read {
			var cerr error
			if err, cerr = copyBody(bw, r.Body, n.buf); cerr != nil {
				u.Discard()
				return nil, nil, attemptFailure{err: cerr, blame: upstreampkg.BlameClientBody, bodyRead: true}
			}
			if err == nil && r.Framing == h1.Chunked {
				err = bw.Close(r.Body.Trailer())
			}
		}
		var resp *h1.Response
		if err == nil || read && !isTimeout(err) {
			// A body write the upstream cut may follow its early answer
			// (RFC 9112 §9.5: a 413 or 401 sent before reading the body,
			// then the close): that answer is the response, not a failure
			// of the server, and the connection goes with it (cut).
			var rerr error
			if resp, rerr = n.final(w, r, u); rerr == nil {
				n.cut = err != nil
				return u, resp, attemptFailure{}
			}
			if err == nil {
				err = rerr
			}
		}
		u.Discard()
		if err == h1.ErrClientGone {
			// Nobody to answer, nothing to blame on the server; settled
			// as 499 (record.finalStatus).
			w.Abandon()
			n.left = true
			return nil, nil, attemptFailure{err: err, blame: upstreampkg.BlameClientGone, bodyRead: read}
		}
		// Again on another connection: one found stale before anything
		// was sent, or an idempotent request (upstream.Retriable) on a
		// reused one the upstream closed as the head went out.
		var why h1.Reason
		if err == h1.ErrStale || reused && !read && upstreampkg.Retriable(r.Method(), false, err) &&
			!isTimeout(err) && !errors.As(err, &why) && err != errSwitch {
			continue
		}
		return nil, nil, attemptFailure{err: err, bodyRead: read}
	}
}

// bodyWriter is the engine's writer of a request body upstream.
type bodyWriter interface{ Write([]byte) (int, error) }

// copyBody copies the client's body to dst through buf. werr is the
// upstream side's failure, rerr the client's (a malformed body: an
// h1.Reason; a stall past body_timeout: os.ErrDeadlineExceeded).
func copyBody(dst bodyWriter, body *h1.Body, buf []byte) (werr, rerr error) {
	for {
		k, err := body.Read(buf)
		if k > 0 {
			if _, werr = dst.Write(buf[:k]); werr != nil {
				return werr, nil
			}
		}
		if err == io.EOF {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// final reads the response head, forwarding 1xx heads but 100 (the
// engine sends the client its own).
func (n *nativeCall) final(w *h1.ResponseWriter, r *h1.Request, u *h1.UpstreamConn) (*h1.Response, error) {
	for {
		u.WatchClient(w)
		resp, err := u.ReadResponse(r.Method())
		switch {
		case err != nil:
			return nil, err
		case resp.Status == http.StatusSwitchingProtocols:
			return nil, errSwitch
		case resp.Status >= 200:
			return resp, nil
		case resp.Status != http.StatusContinue:
			_ = w.Informational(h1.AppendResponse(w.Scratch(), resp, &n.none, false, false))
		}
	}
}

// respond writes the upstream's response to the client: its head edited
// (response_headers, the upstream's quota fields replaced by ours on a
// limited route), its body (flushed per read when streamed: no
// Content-Length, or text/event-stream, as ReverseProxy flushes), its
// trailer. It reports whether the response went out whole.
func (n *nativeCall) respond(w *h1.ResponseWriter, r *h1.Request, rt *Runtime, up *upstream, u *h1.UpstreamConn, resp *h1.Response) (bool, error) {
	nr, res, route := up.native, n.rc.adm.res, n.rc.adm.route
	name := route.CostResponseHeader
	if name != "" {
		n.costN, n.hasCost = headerCost(&resp.Header, name)
	}
	ct, _ := resp.Get("Content-Type")
	n.stream = strings.HasPrefix(ct, "text/event-stream")
	if n.stream {
		u.SetReadTimeout(rt.Config.Server.StreamIdleTimeout)
	}
	n.back = h1.Edits{Drop: nr.plainDrop, Set: nr.respSet}
	if res != nil {
		n.back.Drop = nr.limitedDrop
	}
	framing := resp.Framing
	events := n.stream && framing != h1.Length && framing != h1.NoBody && r.Method() != http.MethodHead
	dechunk := framing == h1.Chunked && (r.ProtoMinor() == 0 || events)
	if events { // streamEvents: close-delimited, so the connection can be watched
		framing = h1.ToClose
	}
	head := h1.AppendResponse(w.Scratch(), resp, &n.back, w.Closing() || framing == h1.ToClose || dechunk, dechunk)
	if res != nil {
		head = append(appendQuotaFields(head[:len(head)-2], rt.Config.Response.Headers, res), "\r\n"...)
	}
	if r.Method() == http.MethodHead {
		framing = h1.NoBody
	}
	n.rc.status = resp.Status
	if err := w.WriteHead(head, framing, resp.Length); err != nil {
		return false, err
	}
	if events {
		ok, err := n.streamEvents(w, u, nr)
		if name != "" && !n.hasCost {
			n.costN, n.hasCost = headerCost(u.Body().Trailer(), name)
		}
		return ok, err
	}
	ok, err := n.copyResponse(w, u.Body(), nr, n.stream || resp.Framing != h1.Length)
	if ok && name != "" && !n.hasCost {
		n.costN, n.hasCost = headerCost(u.Body().Trailer(), name)
	}
	return ok, err
}

// copyResponse copies the upstream's body to w, flushing after each read
// when flush, then its trailer. It reports whether the body went out
// whole; a client gone or a body cut closes the client connection after.
func (n *nativeCall) copyResponse(w *h1.ResponseWriter, body *h1.Body, nr *nativeRoute, flush bool) (bool, error) {
	for {
		k, err := body.Read(n.buf)
		if k > 0 {
			wn, werr := w.Write(n.buf[:k])
			n.rc.bytes += int64(wn)
			if werr == nil && flush {
				werr = w.Flush()
			}
			if werr != nil { // the client is gone
				w.CloseAfter()
				n.left = true
				return false, werr
			}
		}
		if err == io.EOF {
			return true, w.Trailer(body.Trailer())
		}
		if err != nil { // the response is cut: the client sees its connection close
			w.CloseAfter()
			if isTimeout(err) {
				nr.readExpired()
			}
			return false, err
		}
	}
}

// headerCost is responseCost over an engine's head or trailer: one field
// name, a whole number ≥ 0.
func headerCost(h *h1.Header, name string) (int64, bool) {
	v, k := only(h, name)
	if k != 1 {
		return 0, false
	}
	return costValue(v)
}

// answerUpstreamH1 answers a request whose upstream exchange failed
// before a response (err): as the std path's answerError does, but a
// client body that stalled past body_timeout, which is 408 here (the std
// path reads that from its body watch).
func (s *Server) answerUpstreamH1(n *nativeCall, w *h1.ResponseWriter, up *upstream, err error) {
	var ce *upstreampkg.ClientError
	if errors.As(err, &ce) && errors.Is(err, os.ErrDeadlineExceeded) {
		n.ans.header["Connection"] = closeConn
		writeProblem(&n.rc, &n.req, problemBodyTimeout, nil, nil)
	} else {
		answerError(&n.rc, &n.req, err, up.pool.Name, up.native.errs, up.native.fails)
	}
	n.ans.flush(w)
}
