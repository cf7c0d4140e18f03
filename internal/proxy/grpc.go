package proxy

import (
	"net/http"
	"strconv"
	"strings"
)

// isGRPC reports whether r is a gRPC call (Content-Type application/grpc
// or application/grpc+FORMAT, the gRPC over HTTP/2 protocol): rlproxy's
// own answers to it are gRPC statuses, and its body (a stream of messages
// that may rightly pause) is bounded by server.stream_idle_timeout, not
// body_timeout.
func isGRPC(r *http.Request) bool {
	ct := r.Header["Content-Type"]
	return len(ct) > 0 && strings.HasPrefix(ct[0], "application/grpc")
}

// grpcCodes maps each of rlproxy's answers to a gRPC status code
// (google.golang.org/grpc/codes): refusals and a full shaping queue are
// RESOURCE_EXHAUSTED (8), an undecidable limiter, an unreachable
// upstream and a request shed for overload UNAVAILABLE (14), no route and a refused method UNIMPLEMENTED
// (12), an upstream or body timeout DEADLINE_EXCEEDED (4), a malformed
// body INTERNAL (13, gRPC's mapping of HTTP 400).
var grpcCodes = [...]string{
	problemRateLimited:    "8",
	problemQueueFull:      "8",
	problemQuotaLimited:   "8",
	problemUnavailable:    "14",
	problemBadGateway:     "14",
	problemNoRoute:        "12",
	problemMethod:         "12",
	problemGatewayTimeout: "4",
	problemBodyTimeout:    "4",
	problemBadRequest:     "13",
	problemOverloaded:     "14",
	problemBanned:         "8",
	problemPenalty:        "8",
}

// writeGRPCProblem answers a gRPC call in rlproxy's own name: HTTP 200,
// trailers-only (one HEADERS frame that ends the stream), grpc-status and
// grpc-message, with the quota headers already on w and retry-after
// (delay-seconds, when hasRA) as response metadata.
func writeGRPCProblem(w http.ResponseWriter, kind problemKind, msg []byte, ra int64, hasRA bool) {
	h := w.Header()
	vals := new([4]string)
	vals[0], vals[1], vals[2] = "application/grpc", grpcCodes[kind], string(appendGRPCMessage(nil, msg))
	h["Content-Type"] = vals[0:1:1]
	h["Grpc-Status"] = vals[1:2:2]
	h["Grpc-Message"] = vals[2:3:3]
	if hasRA {
		vals[3] = strconv.FormatInt(ra, 10)
		h[hdrRetryAfter] = vals[3:4:4]
	}
	delete(h, "Content-Length")
	w.WriteHeader(http.StatusOK)
}

// appendGRPCMessage percent-encodes msg as grpc-message requires: bytes
// outside printable ASCII, and '%', as %XX.
func appendGRPCMessage(b, msg []byte) []byte {
	for _, c := range msg {
		if c < 0x20 || c > 0x7e || c == '%' {
			b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&0xf])
			continue
		}
		b = append(b, c)
	}
	return b
}
