//go:build race

package realip

// raceEnabled is true under -race, where sync.Pool drops items at random and
// allocation counts mean nothing.
const raceEnabled = true
