//go:build race

package clientkey

// raceEnabled is true under -race, where sync.Pool drops items at random and
// allocation counts mean nothing.
const raceEnabled = true
