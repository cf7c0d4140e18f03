package upstream

import (
	"net/http"

	"golang.org/x/net/http/httpguts"
)

// Blame is whose side a failed attempt on a server was on. Only
// BlameServer counts toward the server's max_fails (its health view) and
// lets the request go to another server: a client must never be able to
// take a pool out of rotation with its own bad request (nginx answers the
// client 400 and keeps its upstream's peers up).
type Blame uint8

const (
	// BlameServer: what the upstream did — a refused or failed dial, a
	// timeout, a reset, a malformed response.
	BlameServer Blame = iota
	// BlameClientBody: reading the client's request body failed (a
	// malformed chunked body or trailer, a body cut short, a stalled one).
	BlameClientBody
	// BlameClientRequest: the transport refused the request before sending
	// it (a method that is not an RFC 9110 token, an invalid header name or
	// value, an invalid Host).
	BlameClientRequest
	// BlameClientGone: the client left (its request's context ended).
	BlameClientGone
)

// String names b as the logs and metrics do.
func (b Blame) String() string {
	switch b {
	case BlameClientBody:
		return "client_body"
	case BlameClientRequest:
		return "client_request"
	case BlameClientGone:
		return "client_gone"
	}
	return "upstream"
}

// ClientError is RoundTrip's error when the client, not the server, made
// the attempt fail: the server is not blamed and the request is not tried
// on another one. Err is the transport's error.
type ClientError struct {
	Blame Blame
	Err   error
}

// Error implements error.
func (e *ClientError) Error() string { return e.Blame.String() + ": " + e.Err.Error() }

// Unwrap returns the transport's error.
func (e *ClientError) Unwrap() error { return e.Err }

// blame is the one place a failed attempt is classified. err is the
// transport's error for req, whose body (nil when it has none) saw every
// read the transport made. It runs on the error path only.
func blame(req *http.Request, body *sentBody) Blame {
	switch {
	case body != nil && body.failed.Load():
		return BlameClientBody
	case req.Context().Err() != nil:
		return BlameClientGone
	case !sendable(req):
		return BlameClientRequest
	}
	return BlameServer
}

// sendable reports whether Go's transports (net/http's HTTP/1 and HTTP/2
// clients) would send req rather than refuse it before writing a byte: its
// method a token (RFC 9110 §9.1), its header and trailer field names and
// values valid (RFC 9110 §5.1, §5.5), its Host valid. These are the checks
// they make; a request failing one never reached the server.
func sendable(req *http.Request) bool {
	// A method is a token, as a field name is (RFC 9110 §9.1, §5.1).
	if req.Method != "" && !httpguts.ValidHeaderFieldName(req.Method) {
		return false
	}
	host := req.Host
	if host == "" && req.URL != nil {
		host = req.URL.Host
	}
	return httpguts.ValidHostHeader(host) && validFields(req.Header) && validFields(req.Trailer)
}

// validFields reports whether every name of h is a token and every value
// a valid field value.
func validFields(h http.Header) bool {
	for k, vv := range h {
		if !httpguts.ValidHeaderFieldName(k) {
			return false
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false
			}
		}
	}
	return true
}
