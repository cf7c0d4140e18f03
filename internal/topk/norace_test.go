//go:build !race

package topk

// raceEnabled is true under -race; see race_test.go.
const raceEnabled = false
