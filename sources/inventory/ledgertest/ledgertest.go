// Package ledgertest is the contract every inventory.Ledger and
// inventory.Feed must meet, run against each implementation by its own
// tests: what is saved is loaded back exactly, a smaller book removes what
// it lacks, and a feed delivers every saved book.
package ledgertest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Ledger is what the contract exercises: a ledger and the feed of the same
// storage.
type Ledger interface {
	inventory.Ledger
	inventory.Feed
}

// Run runs the contract. open returns a new, empty ledger; called twice
// with the same key it returns two handles on the same storage (two
// processes, or a leader and a follower).
func Run(t *testing.T, open func(t *testing.T, key string) Ledger) {
	t.Run("an empty ledger loads an empty book", func(t *testing.T) {
		b, err := open(t, "empty").Load(context.Background())
		require.NoError(t, err)
		require.Empty(t, b.Clusters)
		require.Empty(t, b.Sources)
	})
	t.Run("what is saved is loaded back by another process", func(t *testing.T) {
		want := Fleet(3)
		require.NoError(t, open(t, "roundtrip").Save(context.Background(), want))
		got, err := open(t, "roundtrip").Load(context.Background())
		require.NoError(t, err)
		requireSameBook(t, want, got)
	})
	t.Run("a smaller book removes what it lacks; a changed record is rewritten", func(t *testing.T) {
		l := open(t, "shrink")
		require.NoError(t, l.Save(context.Background(), Fleet(4)))
		want := Fleet(2)
		want.Clusters[0].Missed, want.Clusters[0].Held = 2, true
		want.Clusters[0].MissingSince = time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
		want.Sources[0].Stale, want.Sources[0].LastError, want.Sources[0].ConsecutiveFailures = true, "rancher: 503", 2
		// departures due, kept by an operator's pin and by a dry run
		since := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
		want.Clusters[1].Missed, want.Clusters[1].MissingSince, want.Clusters[1].Pinned = 3, since, true
		want.Clusters[2].Missed, want.Clusters[2].MissingSince, want.Clusters[2].DryRun = 3, since, true
		want.Sources[1].Recent = []inventory.RecentDepartures{ // the breaker's interval and a slow drop count them
			{At: time.Date(2026, 11, 26, 8, 59, 0, 0, time.UTC), Departed: 3, Vanished: 2}, {At: time.Date(2026, 11, 26, 9, 0, 30, 0, time.UTC), Departed: 1}}
		require.NoError(t, l.Save(context.Background(), want))
		got, err := open(t, "shrink").Load(context.Background())
		require.NoError(t, err)
		requireSameBook(t, want, got)
	})
	t.Run("a feed delivers the book, then every saved change", func(t *testing.T) {
		writer, reader := open(t, "feed"), open(t, "feed")
		require.NoError(t, writer.Save(context.Background(), Fleet(2)))
		books := make(chan inventory.Book, 100)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); reader.Watch(ctx, func(b inventory.Book) { books <- b }) }()
		t.Cleanup(func() { cancel(); <-done })
		waitFor(t, books, Fleet(2))
		require.NoError(t, writer.Save(context.Background(), Fleet(5)))
		waitFor(t, books, Fleet(5))
		require.NoError(t, writer.Save(context.Background(), Fleet(1)))
		waitFor(t, books, Fleet(1))
	})
	t.Run("the slices of a book loaded or delivered are the reader's own", func(t *testing.T) {
		writer, reader := open(t, "own"), open(t, "own")
		require.NoError(t, writer.Save(context.Background(), Fleet(2)))
		scribble := func(b inventory.Book) {
			for i := range b.Clusters {
				b.Clusters[i].Missed, b.Clusters[i].Held = 99, true
			}
			for i := range b.Sources {
				b.Sources[i].LastError = "scribbled"
			}
		}
		loaded, err := reader.Load(context.Background())
		require.NoError(t, err)
		scribble(loaded)
		books := make(chan inventory.Book, 100)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			reader.Watch(ctx, func(b inventory.Book) {
				scribble(b)
				books <- b
			})
		}()
		t.Cleanup(func() { cancel(); <-done })
		<-books
		for _, l := range []Ledger{writer, reader} {
			got, err := l.Load(context.Background())
			require.NoError(t, err)
			requireSameBook(t, Fleet(2), got)
		}
	})
}

// waitFor reads books until one is want, but for the renderings' CAs,
// which a feed may leave out (inventory.Feed).
func waitFor(t *testing.T, books <-chan inventory.Book, want inventory.Book) {
	t.Helper()
	wantJSON := encode(t, WithoutCAs(want))
	deadline := time.After(10 * time.Second)
	last := ""
	for {
		select {
		case b := <-books:
			if last = encode(t, WithoutCAs(b)); last == wantJSON {
				return
			}
		case <-deadline:
			require.JSONEq(t, wantJSON, last, "the feed never delivered the saved book")
			return
		}
	}
}

func requireSameBook(t *testing.T, want, got inventory.Book) {
	t.Helper()
	require.JSONEq(t, encode(t, want), encode(t, got))
}

// WithoutCAs is a copy of b whose renderings have no CA: a book as a
// feed may deliver it.
func WithoutCAs(b inventory.Book) inventory.Book {
	b.Clusters = slices.Clone(b.Clusters)
	for i, r := range b.Clusters {
		if r.Rendering != nil {
			c := *r.Rendering
			c.CA = sources.CA{}
			b.Clusters[i].Rendering = &c
		}
	}
	return b
}

func encode(t *testing.T, b inventory.Book) string {
	t.Helper()
	b.Sort()
	raw, err := json.Marshal(b)
	require.NoError(t, err)
	return string(raw)
}

// Fleet is a book of n clusters of source "rancher" (served, with every
// field a rendering can carry) and one pending cluster of source "eks".
func Fleet(n int) inventory.Book {
	b := inventory.Book{Sources: []inventory.SourceRecord{
		{Name: "eks", Provider: sources.ProviderEKS, Synced: true},
		{Name: "rancher", Provider: sources.ProviderRancher, Synced: true},
	}}
	est := time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC)
	const subscription = "0b1f6471-1bf0-4dda-aec3-cb9272f09590" // hosted AKS clusters, as Rancher lists them
	for i := range n {
		name := fmt.Sprintf("prod-%02d", i)
		c := &sources.Cluster{Source: "rancher", Provider: sources.ProviderRancher, Name: name, ID: "c-" + name,
			Server: "https://rancher.example.com/k8s/clusters/c-" + name, CA: sources.CAFromData("dGVzdA=="),
			Auth:   sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{File: "/var/run/token"}},
			Labels: map[string]string{"env": "prod", "tenant": "acme"}, Annotations: map[string]string{"team": "payments"},
			Region: "eu-west-1", Tenant: "acme", Project: "acme", Namespaces: []string{"apps"}, KubernetesVersion: "v1.31.4",
			State: "active", Phase: sources.PhaseReady, Ready: true,
			CloudID: sources.AKSCloudID(subscription, "rg-prod", name), Account: subscription}
		b.Clusters = append(b.Clusters, inventory.Record{Source: "rancher", ID: c.ID, Rendering: c, Served: true, Established: est})
	}
	b.Clusters = append(b.Clusters, inventory.Record{Source: "eks", ID: "arn:aws:eks:eu-west-1:111:cluster/new",
		Unserved: &inventory.Unserved{Name: "new", Source: "eks", ID: "arn:aws:eks:eu-west-1:111:cluster/new", Phase: sources.PhasePending,
			State: "CREATING", Reason: "not ready upstream"}})
	b.Sort()
	return b
}
