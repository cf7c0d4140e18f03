package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
)

// DefaultMaxFileBytes bounds the config file and each keys_file when
// LoadOptions.MaxFileBytes is 0 (64 MiB; rlproxy's -max-config-bytes flag
// changes it): a file beyond it is refused before it is parsed, so a
// runaway generator cannot make a reload take the process's memory.
const DefaultMaxFileBytes = 64 << 20

// LoadOptions tune LoadWith.
type LoadOptions struct {
	// MaxFileBytes bounds the config file and each file it names for
	// parsing (keys_file), in bytes; 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// Overrides replace file values with ones set outside the file.
	Overrides Overrides
	// AllowMissingEnv makes an unset or empty environment variable that a
	// *_env field names a warning instead of an error, with a stand-in
	// value, so a file can be checked away from its secrets (`rlproxy
	// validate -allow-missing-env`, like `nginx -t` in CI). A Config loaded
	// so must never serve.
	AllowMissingEnv bool
	// DefaultEngine is server.engine when the file sets none (EngineAuto
	// or EngineStd; "" means EngineAuto): the test harness runs one suite
	// on either engine with it.
	DefaultEngine string
}

func (o LoadOptions) maxBytes() int64 {
	if o.MaxFileBytes <= 0 {
		return DefaultMaxFileBytes
	}
	return o.MaxFileBytes
}

// LoadWith is Load with options. A config file over the size limit is an
// *Errors naming it ("FILE: N bytes, over the limit of M bytes").
func LoadWith(path string, opts LoadOptions) (*Config, error) {
	var b bytes.Buffer
	if err := readLimited(path, opts.maxBytes(), &b); err != nil {
		if tooBig, ok := err.(*fileTooLarge); ok {
			return nil, &Errors{Problems: []Problem{{File: path, Msg: tooBig.Error()}}}
		}
		return nil, fmt.Errorf("reading config: %w", err)
	}
	return ParseWith(path, b.Bytes(), opts)
}

// readString reads a file the config names (a keys_file) within the size
// limit, as a string (no copy: strings.Builder hands over its buffer).
func (l *loader) readString(path string) (string, error) {
	var b strings.Builder
	if err := readLimited(path, l.opts.maxBytes(), &b); err != nil {
		return "", unwrapPathError(err)
	}
	return b.String(), nil
}

// fileTooLarge is a file over the size limit.
type fileTooLarge struct{ size, limit int64 }

func (e *fileTooLarge) Error() string {
	return fmt.Sprintf("%d bytes, over the limit of %d bytes (rlproxy -max-config-bytes)", e.size, e.limit)
}

// growWriter is strings.Builder or bytes.Buffer: the file is read into
// it with one allocation of its size.
type growWriter interface {
	io.Writer
	Grow(n int)
}

// readLimited copies the file at path into b, refusing (*fileTooLarge) a
// file over limit bytes — by its size before reading, and by what it
// actually yields (a file growing while read, a FIFO).
func readLimited(path string, limit int64, b growWriter) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		if fi.Size() > limit {
			return &fileTooLarge{fi.Size(), limit}
		}
		b.Grow(int(fi.Size()) + bytes.MinRead) // room to see EOF without growing
	}
	n, err := io.Copy(b, io.LimitReader(f, limit+1))
	if err != nil {
		return err
	}
	if n > limit {
		return &fileTooLarge{n, limit}
	}
	return nil
}
