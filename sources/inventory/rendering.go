package inventory

// The renderings a record holds: a copy of its own of the listed cluster,
// its cloud identity kept, another phase.

import (
	"maps"
	"reflect"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// held returns the rendering a record holds for the listed cluster c: the
// one it holds already when they are equal, else a copy of c of its own.
// A record never points into a listing: one that did would keep the whole
// listing in memory (3.6 MiB at 10,000 clusters) for as long as it, or the
// ledger's copy of it, lives, and a few such records, each from another
// listing, would keep as many listings.
func held(prev, c *sources.Cluster) *sources.Cluster {
	if prev != nil && reflect.DeepEqual(prev, c) {
		return prev
	}
	cp := *c
	return &cp
}

// keepCloudIdentity gives c the cloud identity (CloudID, Account) of its
// last rendering prev when its source could not tell it this time: a
// cluster's cloud identity, once known, does not go away (a Rancher-hosted
// AKS cluster whose cloud credential cannot be read, or a source restarted
// since it read it). Without it the cluster would stop being one with its
// listing from the cloud's own source, and that one, a duplicate until
// then, would be served as a second cluster on another server, then
// dropped again when the identity comes back. The label the source puts
// the account in (AccountLabel) is kept with it, so that a selector on it
// keeps the cluster too. A different identity (or account) is the source's
// word, and taken.
func keepCloudIdentity(c, prev *sources.Cluster) {
	if prev == nil || c.CloudID != "" || prev.CloudID == "" {
		return
	}
	if c.Account != "" && !strings.EqualFold(c.Account, prev.Account) {
		return // another account: not the cloud cluster prev named
	}
	c.CloudID, c.Account = prev.CloudID, prev.Account
	if k := c.AccountLabel; k != "" && c.Labels[k] == "" && prev.Account != "" {
		labels := maps.Clone(c.Labels) // shared with the source: never modified
		if labels == nil {
			labels = map[string]string{}
		}
		labels[k] = prev.Account
		c.Labels = labels
	}
}

// withPhase returns c with another phase and state: c itself when they are
// the same, else a copy (sharing what c points to): a rendering is shared
// (snapshots, the ledger), never modified.
func withPhase(c *sources.Cluster, phase sources.Phase, state string) *sources.Cluster {
	if c.Phase == phase && c.State == state {
		return c
	}
	cp := *c
	cp.Phase, cp.State = phase, state
	return &cp
}

func unserved(c *sources.Cluster, phase sources.Phase, reason string) *Unserved {
	return &Unserved{Name: c.Name, Source: c.Source, ID: c.Key(), Phase: phase, State: c.State, Reason: reason}
}
