package config

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// summaryProblemBytes cuts each problem of a Summary: 100 problems of at
// most 256 bytes stay under 64 KiB in a log line even when every byte is
// escaped (slog quotes the value, doubling quotes and newlines at worst).
const summaryProblemBytes = 256

// Summary is Error for logs: at most n problems (each cut to 256 bytes,
// with "…"), one per line, then "and N more problems" when some were left
// out. `rlproxy validate` prints every problem; a refused reload logs this.
func (e *Errors) Summary(n int) string {
	var b strings.Builder
	for i, p := range e.Problems {
		if i == n {
			fmt.Fprintf(&b, "\nand %d more problems (rlproxy validate lists them all)", len(e.Problems)-n)
			if e.Stopped {
				b.WriteString("\n" + stoppedNote)
			}
			break
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		s := p.String()
		if len(s) > summaryProblemBytes {
			cut := summaryProblemBytes
			for cut > 0 && !utf8.RuneStart(s[cut]) {
				cut--
			}
			s = s[:cut] + "…"
		}
		b.WriteString(s)
	}
	return b.String()
}
