package inventory

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestRepairWait: a repair asked for right after the last one waits twice
// as long as it did, up to maxRepairDelay; one asked for after a quiet
// time waits repairDelay again.
func TestRepairWait(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		prev time.Duration
		last time.Time
		now  time.Time
		want time.Duration
	}{
		{name: "the first", now: t0, want: repairDelay},
		{name: "right after the last", prev: time.Second, last: t0, now: t0.Add(100 * time.Millisecond), want: 2 * time.Second},
		{name: "again right after", prev: 8 * time.Second, last: t0, now: t0.Add(15 * time.Second), want: 16 * time.Second},
		{name: "never longer than the most", prev: 40 * time.Second, last: t0, now: t0.Add(time.Second), want: maxRepairDelay},
		{name: "after a quiet time", prev: 16 * time.Second, last: t0, now: t0.Add(40 * time.Second), want: repairDelay},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, repairWait(tc.prev, tc.last, tc.now))
		})
	}
}
