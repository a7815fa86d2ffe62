package inventory

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
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

// refusingLedger is a memory ledger that asks for repairs (Repairer) and
// refuses the next refuse saves, as an API server out of reach would.
type refusingLedger struct {
	*Memory
	repairs chan struct{}
	mu      sync.Mutex
	refuse  int
	saves   []bool // each save's outcome
}

func (l *refusingLedger) Repairs() <-chan struct{} { return l.repairs }

func (l *refusingLedger) Save(ctx context.Context, b Book) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse > 0 {
		l.refuse--
		l.saves = append(l.saves, false)
		return errors.New("dial tcp 10.0.0.1:443: connect: connection refused")
	}
	l.saves = append(l.saves, true)
	return l.Memory.Save(ctx, b)
}

func (l *refusingLedger) outcomes() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.saves)
}

// TestAFailedRepairIsTriedAgain: a repair whose save fails is tried again
// after the next delay, without another write of someone else and without
// a listing (the source lists once an hour). Before, the ledger stayed as
// others left it, every replica answering 503, until the next listing.
// Once the retry succeeds, the next repair waits the first delay again.
func TestAFailedRepairIsTriedAgain(t *testing.T) {
	l := &refusingLedger{Memory: NewMemory(), repairs: make(chan struct{}, 1)}
	src := &scripted{steps: []step{{clusters: []sources.Cluster{cluster("a")}}}}
	inv, err := New([]SourceSpec{spec("s1", src)}, Options{Ledger: l})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); inv.Run(ctx) }()
	defer func() { cancel(); <-done }()
	require.Eventually(t, func() bool { return len(l.outcomes()) == 1 }, 5*time.Second, 10*time.Millisecond, "the first listing saved")

	l.mu.Lock()
	l.refuse = 1
	l.mu.Unlock()
	l.repairs <- struct{}{} // someone else deleted a ClusterProfile
	// the repair after repairDelay, refused; tried again after twice that
	require.Eventually(t, func() bool { return len(l.outcomes()) == 3 }, repairDelay+2*repairDelay+5*time.Second, 20*time.Millisecond,
		"the refused repair tried again")
	assert.Equal(t, []bool{true, false, true}, l.outcomes())

	// the outage over, the next hand edit is repaired after repairDelay,
	// not after the doubled wait of the retry (2*2*repairDelay)
	l.repairs <- struct{}{}
	require.Eventually(t, func() bool { return len(l.outcomes()) == 4 }, 3*repairDelay, 20*time.Millisecond,
		"the next repair waits repairDelay again")
	assert.Equal(t, 1, src.Calls(), "no listing in between")
}
