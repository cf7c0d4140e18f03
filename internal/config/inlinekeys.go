package config

import (
	"bytes"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// flatBlockMin is the fewest credentials an inline `keys:` mapping needs to
// be read line by line rather than as YAML: below it the YAML tree is
// small. Above it the tree would cost about 20× the text (a refused reload
// of a 56 MB file of inline keys peaked near 1 GB), so the lines are cut
// out of what yaml.v3 parses and read as a keys_file is (flatText).
const flatBlockMin = 1024

// flatBlock is one inline `keys:` mapping cut out of the YAML: its lines,
// all `credential: plan` at one indentation (or blank, or comments).
type flatBlock struct {
	flatText
	count int  // credentials
	used  bool // decoded as some plans.NAME.keys
}

// flatBlocks finds each line `keys:` (nothing after it but a comment)
// followed by at least flatBlockMin flat `credential: plan` lines at one
// deeper indentation (blank and comment lines may come between them) and
// returns data with those lines emptied — each keeps its newline, so the
// YAML's line numbers stay — and the blocks by the line of their `keys:`.
// Without such a block it returns data itself and nil. The blocks' text
// is one copy of data, of which their credentials are substrings.
func flatBlocks(data []byte) ([]byte, map[int]*flatBlock) {
	if !bytes.Contains(data, []byte("keys:")) {
		return data, nil
	}
	text := string(data)
	var blocks map[int]*flatBlock
	var out []byte
	kept := 0 // text[:kept] is in out (when out is not nil)
	line := 0
	for pos := 0; pos < len(text); {
		end := lineEnd(text, pos)
		line++
		next := min(end+1, len(text))
		indent, ok := keysLine(text[pos:end])
		if !ok {
			pos = next
			continue
		}
		b, stop := flatRun(text, next, line+1, indent)
		if b == nil {
			pos = next
			continue
		}
		if blocks == nil {
			blocks = map[int]*flatBlock{}
			out = make([]byte, 0, len(text)-(stop-next)+b.count)
		}
		blocks[line] = b
		lines := strings.Count(b.data, "\n")
		out = append(out, text[kept:next]...)
		out = append(out, strings.Repeat("\n", lines)...)
		kept, pos = stop, stop
		line += lines
	}
	if blocks == nil {
		return data, nil
	}
	return append(out, text[kept:]...), blocks
}

// lineEnd is the index of the newline ending the line at pos (len(text)
// for the last line without one).
func lineEnd(text string, pos int) int {
	if i := strings.IndexByte(text[pos:], '\n'); i >= 0 {
		return pos + i
	}
	return len(text)
}

// keysLine reports whether text is `keys:` after spaces (its indent),
// optionally followed by spaces and a comment.
func keysLine(text string) (indent int, ok bool) {
	t := trimSpaces(text)
	rest, found := strings.CutPrefix(t, "keys:")
	if !found {
		return 0, false
	}
	rest = trimSpaces(rest)
	return len(text) - len(t), rest == "" || rest[0] == '#'
}

// flatRun reads the lines from pos (line number first) that belong to a
// `keys:` at indent: it returns them as a block, and where they end, when
// they are at least flatBlockMin flat credentials at one deeper indent;
// nil when any line of the mapping is of another form (the YAML parser
// then reads it, as it would without this).
func flatRun(text string, pos, first, indent int) (*flatBlock, int) {
	b := &flatBlock{flatText: flatText{first: first, indent: -1}}
	start, stop := pos, pos
	for pos < len(text) {
		end := lineEnd(text, pos)
		ln := text[pos:end]
		next := min(end+1, len(text))
		if blankOrComment(ln) {
			pos = next
			continue
		}
		in := len(ln) - len(trimSpaces(ln))
		if in <= indent {
			break
		}
		if b.indent < 0 {
			b.indent = in
		}
		if in != b.indent {
			return nil, 0
		}
		if _, _, ok := flatLine(ln[in:]); !ok {
			return nil, 0
		}
		b.count++
		pos, stop = next, next
	}
	if b.count < flatBlockMin {
		return nil, 0
	}
	b.data = text[start:stop]
	return b, stop
}

// trimSpaces is text without its leading spaces.
func trimSpaces(text string) string {
	for i := 0; i < len(text); i++ {
		if text[i] != ' ' {
			return text[i:]
		}
	}
	return ""
}

// inlineBlock returns the block cut out of the YAML at n, the (null)
// value of a `keys:` field, and marks it used; nil when n is not one.
func (l *loader) inlineBlock(n *yaml.Node) *flatBlock {
	if b := l.blocks[n.Line]; b != nil && isNull(n) {
		b.used = true
		return b
	}
	return nil
}

// blocksUsed reports whether every cut block was decoded as a plan's keys
// (a `keys:` line inside, say, a block scalar was not one).
func (l *loader) blocksUsed() bool {
	for _, b := range l.blocks {
		if !b.used {
			return false
		}
	}
	return true
}

// addSeen records each credential of b in seen ("FILE:LINE" of its first
// mention), as inline YAML keys are, for a keys_file of the same plan.
func (b *flatBlock) addSeen(file string, seen map[string]string) {
	line := b.first - 1
	for rest := b.data; rest != ""; {
		var text string
		text, rest, _ = strings.Cut(rest, "\n")
		line++
		if key, _, ok := b.line(text); ok {
			if _, dup := seen[key]; !dup {
				seen[key] = fmt.Sprintf("%s:%d", file, line)
			}
		}
	}
}
