//go:build race

package e2e

// raceEnabled builds our service with the race detector, like this test.
const raceEnabled = true
