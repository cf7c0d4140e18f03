//go:build !race

package clientkey

// raceEnabled is true under -race; see race_test.go.
const raceEnabled = false
