//go:build race

package store

// raceEnabled: the race detector slows SQLite (pure Go here) many times
// over, so timed bounds do not hold under it.
const raceEnabled = true
