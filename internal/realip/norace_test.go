//go:build !race

package realip

// raceEnabled is true under -race; see race_test.go.
const raceEnabled = false
