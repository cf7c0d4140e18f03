package h1

// Reason is why the parser refused a message. It is an error, and the
// String is a short metric-friendly label. A refused request is answered
// 400 Bad Request and its connection closed: nothing after the refused
// head is read as a request (RFC 9112 §11.2).
type Reason uint8

// Reasons, most specific first. The comments give the rule and its
// source; docs/ENGINE.md lists which of them net/http does not apply.
const (
	OK                  Reason = iota
	BadRequestLine             // not method SP target SP version CRLF (RFC 9112 §3)
	BadMethod                  // method not a token (RFC 9110 §9.1)
	BadTarget                  // target not origin, absolute, authority (CONNECT) or "*" (OPTIONS) form (RFC 9112 §3.2)
	BadVersion                 // version other than HTTP/1.0 or HTTP/1.1
	BadFieldName               // field name not a token, or whitespace before the colon (RFC 9112 §5.1)
	BadFieldValue              // a control byte (NUL, bare CR, ...) in a field value (RFC 9110 §5.5)
	ObsFold                    // a line folded onto the previous field (RFC 9112 §5.2)
	BareLF                     // a line ended by LF without CR (RFC 9112 §2.2)
	BadContentLength           // Content-Length not 1*DIGIT, or too large (RFC 9110 §8.6)
	DupContentLength           // Content-Length sent twice (RFC 9112 §6.3 point 5)
	BadTransferEncoding        // Transfer-Encoding other than one final "chunked" (RFC 9112 §6.3 point 4)
	LengthAndChunked           // Content-Length and Transfer-Encoding both (RFC 9112 §6.1)
	ChunkedOnHTTP10            // any Transfer-Encoding in an HTTP/1.0 message (RFC 9112 §6.1)
	BadHost                    // Host missing (HTTP/1.1), repeated, or not a valid host (RFC 9112 §3.2)
	HeadTooLarge               // the head is longer than Limits.MaxHead
	LineTooLong                // one line is longer than Limits.MaxLine
	BadChunk                   // a chunk-size, extension or chunk CRLF out of grammar (RFC 9112 §7.1)
	BadTrailer                 // a trailer field out of grammar, or too long
	BadStatus                  // a response status line out of grammar (RFC 9112 §4)
	BodyTooShort               // the peer closed before the framed body ended
	ExtraBytes                 // bytes after a response, before the next request was sent

	numReasons
)

var reasonNames = [numReasons]string{
	OK:                  "ok",
	BadRequestLine:      "request_line",
	BadMethod:           "method",
	BadTarget:           "target",
	BadVersion:          "version",
	BadFieldName:        "field_name",
	BadFieldValue:       "field_value",
	ObsFold:             "obs_fold",
	BareLF:              "bare_lf",
	BadContentLength:    "content_length",
	DupContentLength:    "duplicate_content_length",
	BadTransferEncoding: "transfer_encoding",
	LengthAndChunked:    "content_length_and_chunked",
	ChunkedOnHTTP10:     "transfer_encoding_http10",
	BadHost:             "host",
	HeadTooLarge:        "head_too_large",
	LineTooLong:         "line_too_long",
	BadChunk:            "chunk",
	BadTrailer:          "trailer",
	BadStatus:           "status_line",
	BodyTooShort:        "body_too_short",
	ExtraBytes:          "extra_bytes",
}

// String returns the reason's label, e.g. "content_length_and_chunked".
func (r Reason) String() string { return reasonNames[r] }

// Error returns "h1: " and the label.
func (r Reason) Error() string { return "h1: " + reasonNames[r] }
