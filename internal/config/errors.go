package config

import (
	"fmt"
	"sort"
	"strings"
)

// Problem is one mistake in a configuration file, located like a compiler
// message (and like `nginx -t`): FILE:LINE: field: message.
type Problem struct {
	// File is the file the mistake is in: the config file, or a plans
	// keys_file it references.
	File string
	// Line is 1-based; 0 when the problem has no position (e.g. an empty file).
	Line int
	// Field is the dotted path of the field, e.g. "policies.api.rate" or
	// "routes[2].match.path_regex"; empty for YAML syntax errors.
	Field string
	// Msg says what is wrong and, where it helps, what is wanted.
	Msg string
}

// String formats the problem as "FILE:LINE: field: message".
func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field)
		b.WriteString(": ")
	}
	b.WriteString(p.Msg)
	return b.String()
}

// Errors is every problem found in one load, in file order. ParseWith and LoadWith
// return it (as error) whenever at least one problem was found, so a
// `validate` run reports all mistakes at once rather than the first.
type Errors struct {
	Problems []Problem
	// Stopped is true when decoding stopped at MaxProblems problems: the
	// rest of the file was not checked (a file with that many problems is
	// the wrong file, and checking on would cost memory per problem).
	Stopped bool
}

// MaxProblems is the number of problems after which a load stops decoding
// (Errors.Stopped): enough to show any pattern in them, few enough that a
// large wrong file (a million bad credentials) costs little memory.
const MaxProblems = 1000

// full reports whether e holds MaxProblems problems, and marks it stopped.
func (e *Errors) full() bool {
	if len(e.Problems) >= MaxProblems {
		e.Stopped = true
	}
	return e.Stopped
}

// Error prints one problem per line, then a line saying decoding stopped
// when it did.
func (e *Errors) Error() string {
	lines := make([]string, len(e.Problems), len(e.Problems)+1)
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	if e.Stopped {
		lines = append(lines, stoppedNote)
	}
	return strings.Join(lines, "\n")
}

// stoppedNote ends the list of problems of a load that stopped early.
var stoppedNote = fmt.Sprintf("(stopped after %d problems: the rest of the file was not checked)", MaxProblems)

// sortProblems orders problems by file (in order of first appearance, so
// the config file comes before the keys files it names) then by line. The
// sort is stable: problems on one line keep the order they were found in.
func sortProblems(ps []Problem) {
	rank := map[string]int{}
	for _, p := range ps {
		if _, ok := rank[p.File]; !ok {
			rank[p.File] = len(rank)
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if ps[i].File != ps[j].File {
			return rank[ps[i].File] < rank[ps[j].File]
		}
		return ps[i].Line < ps[j].Line
	})
}

// didYouMean returns `; did you mean "X"?` for the candidate closest to
// word, or "" when none is close: at most one edit for words up to 4
// characters, two beyond (a swap of neighbours counts as one edit).
func didYouMean(word string, candidates []string) string {
	best, bestDist := "", 3
	w := strings.ToLower(word)
	for _, c := range candidates {
		if d := editDistance(w, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	if best == "" || (len(word) <= 4 && bestDist > 1) {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein plus transposition of adjacent bytes).
func editDistance(a, b string) int {
	// rows i-2, i-1 and i of the dynamic-programming table.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
