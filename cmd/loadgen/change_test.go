package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// TestAppendCluster: the cluster a change adds is read by the static
// source as the fleet's are, after them, and the file is replaced whole.
func TestAppendCluster(t *testing.T) {
	dir := t.TempDir()
	cs := fleet(4)
	caData, err := newCAs(len(cs)+1, true)
	require.NoError(t, err)
	path := filepath.Join(dir, "load-a.yaml")
	require.NoError(t, writeClusters(path, cs, "load-a", caData))
	src, err := static.New(static.Config{File: path}, "")
	require.NoError(t, err)

	added := fleetCluster(len(cs))
	require.Equal(t, "load-a", added.source, "fleetCluster(4) belongs to load-a")
	require.NoError(t, appendCluster(path, &added, caData[len(cs)]))
	got, err := src.Clusters(context.Background())
	require.NoError(t, err)
	require.Len(t, got, 3, "clusters 0 and 2 of the fleet, then the new one")
	assert.Equal(t, []string{cs[0].name, cs[2].name, added.name}, []string{got[0].Name, got[1].Name, got[2].Name})
	last := got[2]
	assert.Equal(t, added.server, last.Server)
	assert.Equal(t, added.tenant, last.Tenant)
	assert.Equal(t, map[string]string{"tenant": added.tenant, "env": added.env, "region": added.region, "tier": added.tier}, last.Labels)
	assert.NotEqual(t, got[0].CA, last.CA, "a CA of its own")
	_, err = os.Stat(path + ".new")
	assert.ErrorIs(t, err, os.ErrNotExist, "renamed over the file")
	assert.Error(t, appendCluster(filepath.Join(dir, "missing.yaml"), &added, caData[0]))
}

// fakeReplica is a fake replica whose answer holds "name" from after on.
// It records when it last answered without the name and when it first
// answered with it.
type fakeReplica struct {
	*httptest.Server
	mu                    sync.Mutex
	lastHidden, firstSeen time.Time
}

func replicaAt(t *testing.T, name string, after time.Time, status int) *fakeReplica {
	t.Helper()
	r := &fakeReplica{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		params := `{"name":"tenant-00-prod-000000"}`
		now := time.Now()
		r.mu.Lock()
		if now.After(after) {
			params += fmt.Sprintf(`,{"name":%q}`, name)
			if r.firstSeen.IsZero() {
				r.firstSeen = now
			}
		} else {
			r.lastHidden = now
		}
		r.mu.Unlock()
		fmt.Fprintf(w, `{"output":{"parameters":[%s]}}`, params)
	}))
	t.Cleanup(r.Close)
	return r
}

// window is when the request of the first answer holding the name was
// sent: after the last answer without it was made (one connection, one
// request at a time), and before the first answer with it was.
func (r *fakeReplica) window() (after, before time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastHidden, r.firstSeen
}

// TestSight: each replica's first answer holding the cluster is timed from
// the change, and the difference is the follower's time minus the
// leader's, whichever comes first; a replica that never shows it, or
// answers other than 200, is an error naming it.
func TestSight(t *testing.T) {
	const name = "tenant-01-staging-000004"
	want, all := []byte(`"`+name+`"`), inputs()[0].body
	for _, tc := range []struct {
		name                       string
		leaderAfter, followerAfter time.Duration
		followerStatus             int
		err                        string
	}{
		{name: "the follower after the leader", leaderAfter: 100 * time.Millisecond, followerAfter: 250 * time.Millisecond},
		{name: "the follower before the leader", leaderAfter: 250 * time.Millisecond, followerAfter: 100 * time.Millisecond},
		{name: "a follower that never shows it", leaderAfter: 50 * time.Millisecond, followerAfter: time.Hour, err: "the follower: not in the answer"},
		{name: "a follower that fails", leaderAfter: 50 * time.Millisecond, followerStatus: http.StatusServiceUnavailable, err: "the follower: poll: status 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := time.Now()
			status := http.StatusOK
			if tc.followerStatus != 0 {
				status = tc.followerStatus
			}
			leader := replicaAt(t, name, changed.Add(tc.leaderAfter), http.StatusOK)
			follower := replicaAt(t, name, changed.Add(tc.followerAfter), status)
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			cr := &changeResult{}
			err := cr.sight(ctx, leader.URL, follower.URL, all, want, 5*time.Millisecond, changed)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			// times from the fake's clock, not from the scheduler: a
			// loaded machine delays the polls, never these bounds
			for _, r := range []struct {
				name string
				got  time.Duration
				fake *fakeReplica
			}{{"leader", cr.Leader, leader}, {"follower", cr.Follower, follower}} {
				hidden, seen := r.fake.window()
				sent := changed.Add(r.got)
				assert.True(t, sent.After(hidden), "the %s: sent after the last answer without it (%s after)", r.name, sent.Sub(hidden))
				assert.False(t, sent.After(seen), "the %s: sent before the first answer with it was made (%s after)", r.name, sent.Sub(seen))
			}
			assert.Equal(t, (cr.Follower - cr.Leader).Abs(), cr.Difference)
			assert.Positive(t, cr.Resolution)
			assert.Greater(t, cr.Polls, 4, "asked again until it showed")
		})
	}
}

// TestMeasureChange: the change is made in the clusters file and seen by
// replicas that answer what the file holds, one of them late.
func TestMeasureChange(t *testing.T) {
	dir := t.TempDir()
	cs := fleet(3)
	caData, err := newCAs(len(cs), false)
	require.NoError(t, err)
	for _, src := range sourceNames {
		require.NoError(t, writeClusters(filepath.Join(dir, src+".yaml"), cs, src, caData))
	}
	var late atomic.Int64 // the follower's answers lag this many requests
	replica := func(lag int64) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if lag > 0 && late.Add(1) <= lag {
				fmt.Fprint(w, `{"output":{"parameters":[]}}`)
				return
			}
			var names []string
			for _, src := range sourceNames {
				f, err := os.Open(filepath.Join(dir, src+".yaml"))
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				sc := bufio.NewScanner(f)
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					if n, ok := strings.CutPrefix(sc.Text(), "  - name: "); ok {
						names = append(names, fmt.Sprintf(`{"name":%q}`, n))
					}
				}
				f.Close()
			}
			fmt.Fprintf(w, `{"output":{"parameters":[%s]}}`, strings.Join(names, ","))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	leader, follower := replica(0), replica(10)
	cr := measureChange(context.Background(), dir, len(cs), leader.URL, follower.URL, inputs())
	require.Empty(t, cr.Error)
	assert.Equal(t, fleetCluster(3).name, cr.Cluster)
	assert.Less(t, cr.Leader, cr.Follower, "the follower lags ten answers")
	assert.GreaterOrEqual(t, cr.Difference, 9*pollPeriod, "ten polls apart, less the first's head start")
	b, err := os.ReadFile(filepath.Join(dir, fleetCluster(3).source+".yaml"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "  - name: "+cr.Cluster+"\n")
}
