package h1

import (
	"errors"
	"io"
)

// chunk states of a chunked body (RFC 9112 §7.1).
const (
	atSize  = iota // at a chunk-size line
	inData         // in chunk-data, left bytes to go
	atCRLF         // at the CRLF after chunk-data
	atTrail        // at the trailer section
	done           // read to the end
)

// maxChunkLine bounds a chunk-size line with its extensions, in bytes
// (net/http's limit too).
const maxChunkLine = 4096

// maxChunkExcess bounds the bytes of chunk lines beyond 16 per chunk plus
// twice the chunk's data, summed over a body, as net/http's chunked reader
// does: a body of tiny chunks with long extensions is refused.
const maxChunkExcess = 16 << 10

// Body reads a message body as its framing delimits it: Content-Length
// bytes, a chunked body decoded (every chunk line and the trailer
// section checked; the caller re-frames it), or everything up to the
// close. It returns io.EOF at the end of the body and a Reason for a
// framing fault (the connection must then be closed); a body cut short
// by the peer is BodyTooShort. A Body is reused per connection.
type Body struct {
	rd      *reader
	framing Framing
	left    int64 // Length: bytes to go; Chunked: bytes left in the chunk
	excess  int64 // Chunked: chunk-line overhead so far, see maxChunkExcess
	st      uint8
	err     error
	maxHead int
	cont    *ResponseWriter // sends 100 Continue before the first read, if due

	trailer Header
	tbuf    []byte // the trailer section's bytes, owned by the Body
}

// reset prepares b for a new body on rd.
func (b *Body) reset(rd *reader, f Framing, length int64, maxHead int) {
	*b = Body{rd: rd, framing: f, left: length, maxHead: maxHead,
		trailer: b.trailer, tbuf: b.tbuf[:0]}
	b.trailer.reset(b.tbuf)
	if f == NoBody || f == Length && length == 0 {
		b.err = io.EOF
	}
}

// Trailer returns the trailer fields of a chunked body, complete once
// Read has returned io.EOF; valid until the next request on the
// connection.
func (b *Body) Trailer() *Header { return &b.trailer }

// Done reports whether the body was read to its end.
func (b *Body) Done() bool { return b.err == io.EOF }

// Read reads body bytes into p.
func (b *Body) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.cont != nil {
		if err := b.cont.autoContinue(); err != nil {
			return 0, err
		}
		b.cont = nil
	}
	var n int
	switch b.framing {
	case Length:
		n, b.err = b.readLength(p)
	case Chunked:
		n, b.err = b.readChunked(p)
	default:
		n, b.err = b.rd.readAtMost(p)
	}
	return n, b.err
}

func (b *Body) readLength(p []byte) (int, error) {
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rd.readAtMost(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		return n, io.EOF
	case errors.Is(err, io.EOF):
		return n, BodyTooShort
	}
	return n, err
}

func (b *Body) readChunked(p []byte) (int, error) {
	for b.st != inData {
		if err := b.step(); err != nil {
			return 0, err
		}
		if b.st == done {
			return 0, io.EOF
		}
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rd.readAtMost(p)
	b.left -= int64(n)
	if b.left == 0 {
		b.st = atCRLF
	}
	if errors.Is(err, io.EOF) {
		err = BodyTooShort
	}
	return n, err
}

// step reads one chunk-size line, chunk CRLF or the trailer section.
func (b *Body) step() error {
	if b.st == atTrail {
		return b.readTrailer()
	}
	line, err := b.line(maxChunkLine)
	if err != nil {
		return err
	}
	if b.st == atCRLF {
		if len(line) != 0 {
			return BadChunk
		}
		b.st = atSize
		return nil
	}
	size, ok := chunkSize(line)
	if !ok {
		return BadChunk
	}
	b.left, b.st = size, inData
	if size == 0 {
		b.st = atTrail
		return nil
	}
	// The same sums as net/http's, wrapping included, so both refuse
	// the same bodies; the last chunk is not counted there either.
	b.excess = max(b.excess+int64(len(line))+2-(16+2*size), 0)
	if b.excess > maxChunkExcess {
		return BadChunk
	}
	return nil
}

// line returns the next CRLF-ended line without its CRLF, consumed; the
// bytes are valid until the next read.
func (b *Body) line(max int) ([]byte, error) {
	for {
		buf := b.rd.buffered()
		if i := indexByte(buf, '\n'); i >= 0 {
			if i == 0 || buf[i-1] != '\r' || i-1 > max { // the bound also when the line came whole
				return nil, BadChunk
			}
			b.rd.consume(i + 1)
			return buf[:i-1], nil
		}
		if len(buf) > max {
			return nil, BadChunk
		}
		if err := b.rd.fill(); err != nil {
			switch {
			case errors.Is(err, io.EOF):
				return nil, BodyTooShort
			case err == errFull:
				return nil, BadChunk
			}
			return nil, err
		}
	}
}

// readTrailer reads the trailer section (RFC 9112 §7.1.2) into tbuf.
func (b *Body) readTrailer() error {
	for {
		line, err := b.line(b.maxHead)
		if err != nil {
			if err == BadChunk {
				return BadTrailer
			}
			return err
		}
		if len(line) == 0 {
			b.st = done
			b.trailer.buf = b.tbuf
			return nil
		}
		if len(b.tbuf)+len(line)+2 > b.maxHead {
			return BadTrailer
		}
		start := len(b.tbuf)
		b.tbuf = append(append(b.tbuf, line...), '\r', '\n')
		f, _, why := parseField(b.tbuf, start)
		if why != OK {
			return BadTrailer
		}
		b.trailer.fields = append(b.trailer.fields, f)
	}
}

// chunkSize parses chunk-size [chunk-ext] (RFC 9112 §7.1.1): 1 to 16
// HEXDIG, at most 2^63-1, then extensions ";" name ["=" token /
// quoted-string] with optional whitespace around "=" and after ";".
// Two rules follow net/http's chunked reader rather than the RFC's wider
// grammar, so that no line it refuses is accepted here: the digits are
// counted with their leading zeros, and whitespace after the size may
// end the line but not come before a ";".
func chunkSize(l []byte) (int64, bool) {
	var n uint64
	i := 0
	for ; i < len(l); i++ {
		d, ok := unhex(l[i])
		if !ok {
			break
		}
		if i == 16 {
			return 0, false
		}
		n = n<<4 | uint64(d)
	}
	if i == 0 || n >= 1<<63 {
		return 0, false
	}
	ext := l[i:]
	if rest := trimOWSLeft(ext); len(rest) > 0 && len(rest) < len(ext) {
		return 0, false
	}
	return int64(n), validExtensions(ext)
}

// validExtensions checks *( BWS ";" BWS name [ BWS "=" BWS value ] ).
func validExtensions(l []byte) bool {
	for {
		l = trimOWSLeft(l)
		if len(l) == 0 {
			return true
		}
		if l[0] != ';' {
			return false
		}
		l = trimOWSLeft(l[1:])
		i := tokenLen(l)
		if i == 0 {
			return false
		}
		l = trimOWSLeft(l[i:])
		if len(l) == 0 || l[0] != '=' {
			continue
		}
		l = trimOWSLeft(l[1:])
		if i = tokenLen(l); i == 0 {
			i = quotedLen(l)
		}
		if i == 0 {
			return false
		}
		l = l[i:]
	}
}

func trimOWSLeft(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	return b
}

func tokenLen(b []byte) int {
	i := 0
	for i < len(b) && class[b[i]]&cToken != 0 {
		i++
	}
	return i
}

// quotedLen returns the length of the quoted-string at b's start (RFC
// 9110 §5.6.4), or 0.
func quotedLen(b []byte) int {
	if len(b) == 0 || b[0] != '"' {
		return 0
	}
	for i := 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			return i + 1
		case c == '\\' && i+1 < len(b) && class[b[i+1]]&cValue != 0:
			i++
		case class[c]&cValue == 0:
			return 0
		}
	}
	return 0
}
