//go:build race

package topk

// raceEnabled is true under -race, where every memory access is checked
// and the 1,000,000-client flood takes ten times as long.
const raceEnabled = true
