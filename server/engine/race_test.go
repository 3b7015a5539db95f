//go:build race

package engine

// raceEnabled: the race detector slows every access several times, so the
// largest data sets are cut down under it.
const raceEnabled = true
