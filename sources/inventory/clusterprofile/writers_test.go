package clusterprofile

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// inFlight records the most writes of objects and of statuses in flight
// at once; each write is held a moment so that those sent together
// overlap.
type inFlight struct {
	rt http.RoundTripper

	mu                      sync.Mutex
	objects, statuses       int
	maxObjects, maxStatuses int
}

func (f *inFlight) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet || !strings.Contains(r.URL.Path, "/"+Resource.Resource) {
		return f.rt.RoundTrip(r)
	}
	status := strings.HasSuffix(r.URL.Path, "/status")
	f.mu.Lock()
	if status {
		f.statuses++
		f.maxStatuses = max(f.maxStatuses, f.statuses)
	} else {
		f.objects++
		f.maxObjects = max(f.maxObjects, f.objects)
	}
	f.mu.Unlock()
	time.Sleep(20 * time.Millisecond)
	resp, err := f.rt.RoundTrip(r)
	f.mu.Lock()
	if status {
		f.statuses--
	} else {
		f.objects--
	}
	f.mu.Unlock()
	return resp, err
}

// TestStatusWritesLeaveRoomForTheSecrets: a save has at most
// StatusWriters status writes in flight, fewer than its writes of objects
// (Writers): on a cold start the statuses, which no answer waits for,
// leave most of the apiserver to the cluster Secrets written alongside.
func TestStatusWritesLeaveRoomForTheSecrets(t *testing.T) {
	c := newCluster(t)
	f := &inFlight{}
	l := c.ledgerThrough(t, "owner-1", func(rt http.RoundTripper) http.RoundTripper {
		f.rt = rt
		return f
	})
	fleet := ledgertest.Fleet(40)
	require.NoError(t, l.Save(context.Background(), fleet))

	f.mu.Lock()
	defer f.mu.Unlock()
	assert.LessOrEqual(t, f.maxStatuses, StatusWriters, "status writes in flight")
	assert.Greater(t, f.maxObjects, StatusWriters, "the objects' writes are not held to the statuses' limit")
	assert.LessOrEqual(t, f.maxObjects, Writers)
	assert.Greater(t, f.maxStatuses, 1, "the statuses are written side by side all the same")
}
