package clusterprofile

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/ledgertest"
)

// conditionTimes are the conditions' times, which FirstWrites takes from
// its caller and a save from its clock.
var conditionTimes = regexp.MustCompile(`"lastTransitionTime":"[^"]*"`)

// TestFirstWritesAreALeadersFirstWrites: what FirstWrites gives (what
// cmd/loadgen's apiserver ceiling sends) is what a leader sends when it
// saves a record new to the ledger: the same create and the same status
// apply, byte for byte but for the conditions' times.
func TestFirstWritesAreALeadersFirstWrites(t *testing.T) {
	c := newCluster(t)
	var mu sync.Mutex
	sent := map[string]string{} // "POST" or "PATCH <name>/status": body
	capture := func(r *http.Request) {
		if !strings.Contains(r.URL.Path, "/"+Resource.Resource) || r.GetBody == nil {
			return
		}
		body, err := r.GetBody()
		require.NoError(t, err)
		b, err := io.ReadAll(body)
		require.NoError(t, err)
		key := r.Method
		if r.Method == http.MethodPatch {
			key += " " + r.URL.Path[strings.LastIndex(r.URL.Path, "/"+Resource.Resource+"/")+len(Resource.Resource)+2:]
		}
		mu.Lock()
		defer mu.Unlock()
		if r.Method == http.MethodPost {
			key += " " + string(b)
		}
		sent[key] = string(b)
	}
	c.counter.beforeWrite.Store(&capture)
	l := c.ledger(t, "owner-1")
	fleet := ledgertest.Fleet(3)
	now := time.Now()
	require.NoError(t, l.Save(context.Background(), fleet))

	for i := range fleet.Clusters {
		name, create, status, err := FirstWrites(Options{Namespace: c.ns, OwnerID: "owner-1"}, &fleet.Clusters[i], now)
		require.NoError(t, err)
		assert.Equal(t, objectName("owner-1", &fleet.Clusters[i]), name)
		mu.Lock()
		_, created := sent["POST "+string(create)]
		applied, ok := sent["PATCH "+name+"/status"]
		mu.Unlock()
		assert.True(t, created, "the create of %s, as sent", name)
		if assert.True(t, ok, "the status of %s was applied", name) {
			assert.Equal(t, conditionTimes.ReplaceAllString(applied, ""), conditionTimes.ReplaceAllString(string(status), ""))
			if fleet.Clusters[i].Rendering != nil {
				assert.Contains(t, string(status), `"accessProviders"`, "the status of a rendered cluster, in full")
			}
		}
	}
}
