package clustersecret

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Policy limits what a plan may do, as external-dns's policies do.
type Policy string

// The policies.
const (
	// PolicySync creates, updates and prunes.
	PolicySync Policy = "sync"
	// PolicyUpsertOnly creates and updates, never deletes (the default).
	PolicyUpsertOnly Policy = "upsert-only"
	// PolicyCreateOnly only creates missing Secrets.
	PolicyCreateOnly Policy = "create-only"
)

// Valid reports whether p is a known policy.
func (p Policy) Valid() bool {
	return p == PolicySync || p == PolicyUpsertOnly || p == PolicyCreateOnly
}

// Input is everything a plan is computed from; no I/O happens in Plan.
type Input struct {
	// Desired Secrets of the served clusters (in the selection), compact
	// or not: Plan reads their names, servers and digests.
	Desired []Desired
	// Current holds the Record of every cluster Secret of the namespace,
	// ours or not, as read from the API (with the full Secret) or kept by
	// the cache (CacheTransform).
	Current []*Record
	// Snapshot tells which clusters are served, listed, or confirmed
	// departed, and which sources completed their latest listing.
	Snapshot *inventory.Snapshot
	// Listings maps a source to the start of its last successful listing;
	// a new value is one more complete listing.
	Listings map[string]time.Time
	// Held names clusters (by Identity) that are served but got no desired
	// Secret this pass (their token could not be read, ...): neither
	// created nor deleted.
	Held map[string]bool
	// Deselected names served clusters (by Identity) outside the Secrets'
	// selection: their Secrets count down like those of clusters that left.
	Deselected map[string]bool
	OwnerID    string
	Policy     Policy
	Prune      PruneOptions
	Now        time.Time
}

// Identity is how the plan names a cluster across renames: its source and
// its ID.
func Identity(source, id string) string { return source + "/" + id }

// Update changes the Secret of Old in place: the reconciler applies Want
// (a content update: merge) or Countdown (a countdown) to the Secret Old
// holds when read from the API, else to the Secret it reads then, and to a
// fresh copy on a conflict.
type Update struct {
	Old *Record
	// Want is the desired Secret of a content update (nil for a
	// countdown), rendered when it is written, under Old's name.
	Want *Desired
	// Countdown, for a countdown, is the prune countdown annotations the
	// Secret gets (none: the countdown is cleared).
	Countdown map[string]string
	// Reason is "content" or "countdown".
	Reason string
}

// Clash is a desired Secret that would touch a Secret it must not: one we
// do not own (by name or server), or one of ours for another cluster.
type Clash struct {
	Cluster string `json:"cluster"`
	Secret  string `json:"secret"`
	// By is "name" (the Secret's), "server", "cluster name" (Argo CD's
	// cluster name, which Applications may select a destination by) or
	// "identity".
	By string `json:"by"`
}

// Pending is a Secret counting down to its deletion.
type Pending struct {
	Secret   string    `json:"secret"`
	Cluster  string    `json:"cluster"`
	Source   string    `json:"source"`
	Missed   int       `json:"missedListings"`
	Needed   int       `json:"neededListings"`
	Since    time.Time `json:"missingSince"`
	DeleteAt time.Time `json:"deleteNotBefore,omitzero"`
	// Held says why the countdown does not advance, if it does not.
	Held string `json:"held,omitempty"`
}

// Changes is the outcome of Plan.
type Changes struct {
	Create  []Desired
	Update  []Update
	Delete  []*Record
	Blocked []*Record
	Clashes []Clash
	Pending []Pending
	// Unchanged counts our Secrets that need no write.
	Unchanged int
	// upToDate are the desired Secrets with an issued token (see issuedOf)
	// whose Secret holds their content already; unwritable those with an
	// issued token that have no Secret of ours and cannot get one (a
	// clash), frozen those with an issued token whose Secret differs and
	// is never updated (create-only).
	upToDate, unwritable, frozen []Desired
}

// Writes is the number of API writes the changes need.
func (c *Changes) Writes() int { return len(c.Create) + len(c.Update) + len(c.Delete) }

// Plan compares desired and current Secrets. It is pure. Our Secret of a
// cluster is found by identity (source label and cluster-id annotation;
// Secrets written before the annotation existed by source and cluster
// name), so a rename or an upgrade updates the one Secret in place.
//
//	current (ours unless said)          cluster                         action
//	none                                served                          create (unless a Secret has its name, or a
//	                                                                    foreign one its server or cluster name: clash)
//	found by identity, content differs  served                          update in place (not under create-only)
//	found by identity, content equal    served                          nothing
//	foreign Secret, same server         served, ours exists             clash: reported, ours left as it is
//	ours for another cluster, same      served                          clash: reported, no create; ours for
//	server, or same cluster name and                                    this cluster left as it is
//	not renamed away in this plan
//	foreign Secret, same cluster name   served, ours exists             clash: reported, ours kept up to date
//	                                                                    (left as it is if ours was renamed onto it)
//	any                                 served but held, unserved,
//	                                    duplicate, in a name conflict   nothing (countdown cleared)
//	any                                 departure confirmed             delete (sync only, unless pinned or the
//	                                                                    breaker trips: blocked)
//	any                                 deselected, or unknown (left
//	                                    before this process started)    the countdown below
//	any                                 source failed/unsynced/
//	                                    not configured                  nothing: countdown frozen
//	any                                 pinned, or policy not sync      nothing
//	no countdown                        missing from a complete listing update: start countdown (1 listing missed)
//	countdown, new complete listing     missing                         update: count it
//	countdown reached AfterListings     missing, grace period passed    delete (unless the breaker trips: blocked)
//
// A Secret is never deleted because a foreign Secret has its name or
// server, and never while its cluster is listed in any form.
func Plan(in Input) Changes {
	var ch Changes
	cur := indexCurrent(in.Current, in.OwnerID)
	cur.claimed = claimed(in.Desired, &cur)
	matched := map[string]bool{}
	for _, d := range in.Desired {
		planDesired(&ch, &cur, matched, d, in.Policy)
	}
	var deletions []*Record
	for _, name := range sortedSecretNames(cur.owned) {
		if s := cur.owned[name]; !matched[name] && planUnmatched(&ch, &in, s) {
			deletions = append(deletions, s)
		}
	}
	total := len(in.Current) - len(cur.foreignByName)
	limit := max(in.Prune.MaxDeletions, int(math.Ceil(float64(total)*in.Prune.MaxDeletionsPercent/100)))
	if len(deletions) > limit {
		ch.Blocked = deletions
	} else {
		ch.Delete = deletions
	}
	return ch
}

// secretIndex indexes the current Secrets of a plan's input.
type secretIndex struct {
	// owned holds ours by name; byIdentity ours by Identity, and
	// byLegacyName ours written before the cluster-id annotation existed,
	// by source and cluster name.
	owned, byIdentity, byLegacyName map[string]*Record
	// ownedByServer holds ours by server (sources.ServerKey), and
	// ownedByCluster by Argo CD cluster name; each also holds the Secrets
	// the plan creates, as it plans them.
	ownedByServer, ownedByCluster map[string]*Record
	// claimed names ours that a desired cluster finds by its identity:
	// the name each will hold once written (see claimed).
	claimed map[string]string
	// foreignByName holds the Secrets we do not own by name, and
	// foreignByServer and foreignByCluster the cluster Secrets among them
	// by server and by Argo CD cluster name.
	foreignByName, foreignByServer, foreignByCluster map[string]*Record
}

func indexCurrent(secrets []*Record, ownerID string) secretIndex {
	c := secretIndex{owned: map[string]*Record{}, byIdentity: map[string]*Record{}, byLegacyName: map[string]*Record{},
		ownedByServer: map[string]*Record{}, ownedByCluster: map[string]*Record{},
		foreignByName: map[string]*Record{}, foreignByServer: map[string]*Record{}, foreignByCluster: map[string]*Record{}}
	for _, s := range secrets {
		if s.owned(ownerID) {
			c.owned[s.Name] = s
			if s.server != "" {
				c.ownedByServer[sources.ServerKey(s.server)] = s
			}
			if s.name != "" {
				c.ownedByCluster[s.name] = s
			}
			if id := s.clusterID; id != "" {
				c.byIdentity[Identity(s.Label(LabelSource), id)] = s
			} else {
				c.byLegacyName[Identity(s.Label(LabelSource), s.cluster)] = s
			}
			continue
		}
		c.foreignByName[s.Name] = s
		if s.Label(LabelSecretType) != "cluster" {
			continue
		}
		if s.server != "" {
			c.foreignByServer[sources.ServerKey(s.server)] = s
		}
		if s.name != "" {
			c.foreignByCluster[s.name] = s
		}
	}
	return c
}

// claimed returns, for each Secret of ours a desired cluster finds by its
// identity, the Argo CD cluster name that cluster wants it to hold.
func claimed(desired []Desired, c *secretIndex) map[string]string {
	out := make(map[string]string, len(desired))
	for _, d := range desired {
		if cur := c.find(d); cur != nil {
			out[cur.Name] = d.Cluster
		}
	}
	return out
}

// find returns ours that d's cluster finds by its identity (source and
// id; for a Secret written before the cluster-id annotation, source and
// cluster name), nil if none.
func (c *secretIndex) find(d Desired) *Record {
	if cur := c.byIdentity[Identity(d.Source, d.ID)]; cur != nil {
		return cur
	}
	return c.byLegacyName[Identity(d.Source, d.Cluster)]
}

// ownCluster returns ours, other than cur, that holds Argo CD cluster
// name n and will still hold it once the plan is written: a departed or
// unknown cluster's Secret kept (not sync, pinned, breaker, countdown), or
// one created in this plan. One claimed by a desired cluster renamed
// away from n does not hold it.
func (c *secretIndex) ownCluster(n string, cur *Record) *Record {
	s := c.ownedByCluster[n]
	if s == nil || s == cur {
		return nil
	}
	if want, ok := c.claimed[s.Name]; ok && want != n {
		return nil
	}
	return s
}

// planDesired plans the Secret of d: a create, an update in place, nothing,
// or a clash. matched collects our Secrets that a desired cluster claims.
func planDesired(ch *Changes, c *secretIndex, matched map[string]bool, d Desired, policy Policy) {
	foreignServer := c.foreignByServer[sources.ServerKey(d.server)]
	cur := c.find(d)
	if cur != nil && matched[cur.Name] {
		cur = nil // a legacy Secret already taken by another cluster of that name
	}
	// ours for another cluster with d's server (one that left, a renamed
	// source's, a duplicate's): Argo CD would pick one of the two
	ownServer := c.ownedByServer[sources.ServerKey(d.server)]
	if ownServer == cur {
		ownServer = nil
	}
	if cur == nil {
		planCreate(ch, c, matched, d, foreignServer, ownServer)
		return
	}
	matched[cur.Name] = true
	if holder := cmp.Or(foreignServer, ownServer); holder != nil {
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: holder.Name, By: "server"})
		clearCountdown(ch, cur)
		return
	}
	if other := c.ownCluster(d.Cluster, cur); other != nil && cur.name != d.Cluster {
		// renamed onto the name ours for another cluster keeps: the
		// newcomer, left as it is
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: other.Name, By: "cluster name"})
		ch.Unchanged++
		return
	}
	if f := c.foreignByCluster[d.Cluster]; f != nil {
		// ours held the name first: kept and kept up to date, the clash
		// reported. Ours renamed onto a name the other Secret holds is
		// the newcomer: left as it is, as under an agent's name (never
		// written again with it), so that no write of ours makes two
		// clusters share a destination name
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: f.Name, By: "cluster name"})
		if f.agent || cur.name != d.Cluster {
			ch.Unchanged++
			return
		}
	}
	switch {
	case upToDate(cur, &d):
		ch.Unchanged++
		if d.cluster != nil && issuedOf(d.cluster, d.opts) != nil {
			ch.upToDate = append(ch.upToDate, d)
		}
	case policy == PolicyCreateOnly:
		ch.Unchanged++
		if d.cluster != nil && issuedOf(d.cluster, d.opts) != nil {
			ch.frozen = append(ch.frozen, d)
		}
	default: // in place: an upgrade or a rename keeps the Secret
		ch.Update = append(ch.Update, Update{Old: cur, Want: &d, Reason: "content"})
	}
}

// planCreate plans the Secret of d, which has none of ours: a create, or a
// clash with the Secret that holds its name, server or cluster name
// (foreignServer and ownServer: the Secrets, not ours and ours, that hold
// its server). A create claims its server and cluster name within the
// plan.
func planCreate(ch *Changes, c *secretIndex, matched map[string]bool, d Desired, foreignServer, ownServer *Record) {
	switch {
	case c.foreignByName[d.name] != nil:
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: d.name, By: "name"})
	case foreignServer != nil:
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: foreignServer.Name, By: "server"})
	case c.foreignByCluster[d.Cluster] != nil:
		// Argo CD refuses a destination name that two clusters share
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: c.foreignByCluster[d.Cluster].Name, By: "cluster name"})
	case c.owned[d.name] != nil:
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: d.name, By: "identity"})
		matched[d.name] = true // another cluster's: never updated, never pruned for this one
	case ownServer != nil:
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: ownServer.Name, By: "server"})
	case c.ownCluster(d.Cluster, nil) != nil:
		// ours for a cluster that left under that name, kept: Argo CD
		// would refuse the name both hold
		ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: c.ownedByCluster[d.Cluster].Name, By: "cluster name"})
	default:
		ch.Create = append(ch.Create, d)
		// claimed within the plan: a second cluster of this server
		// or name (two spellings of a server both established)
		// clashes with it rather than getting a second Secret
		created := &Record{Name: d.name, server: d.server, name: d.Cluster}
		c.ownedByServer[sources.ServerKey(d.server)] = created
		c.ownedByCluster[d.Cluster] = created
		return
	}
	if d.cluster != nil && issuedOf(d.cluster, d.opts) != nil {
		ch.unwritable = append(ch.unwritable, d)
	}
}

// Owned reports whether s carries our managed-by label and owner id. An
// agent's Secret (sources.IsAgentSecret) is never ours, whatever labels
// someone copied onto it: it is written by argocd-agentctl or the
// principal, which refresh it in place.
func Owned(s *corev1.Secret, ownerID string) bool {
	return s.Labels[LabelManagedBy] == ManagedByValue && s.Labels[LabelOwner] == ownerID && ownerID != "" &&
		!sources.IsAgentSecret(s.Labels, s.Annotations)
}

// upToDate reports whether cur needs no content update to want: the
// digest of its owned content is want's (see ownedDigest), which then
// merging want into it changes nothing. A desired Secret whose digest does
// not cover all its keys is never up to date: the update compares the
// Secret in full.
func upToDate(cur *Record, want *Desired) bool {
	return want.covered && cur.digest == want.digest
}

func sortedSecretNames(m map[string]*Record) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// String summarizes changes for logs: names and counts, never content.
func (c *Changes) String() string {
	var created, deleted, blocked, upd []string
	for _, d := range c.Create {
		created = append(created, d.name)
	}
	for _, s := range c.Delete {
		deleted = append(deleted, s.Name)
	}
	for _, s := range c.Blocked {
		blocked = append(blocked, s.Name)
	}
	for _, u := range c.Update {
		upd = append(upd, u.Old.Name+"("+u.Reason+")")
	}
	return fmt.Sprintf("create=%s update=%s delete=%s blocked=%s clashes=%d pending=%d unchanged=%d",
		firstNames(created), firstNames(upd), firstNames(deleted), firstNames(blocked), len(c.Clashes), len(c.Pending), c.Unchanged)
}

// planLogNames is how many names a plan's log line shows of each kind.
const planLogNames = 5

// firstNames renders a count and at most planLogNames of the names: a plan
// of 10,000 creates is one short line, not the fleet.
func firstNames(names []string) string {
	if len(names) <= planLogNames {
		return fmt.Sprintf("%d[%s]", len(names), strings.Join(names, ","))
	}
	return fmt.Sprintf("%d[%s,…]", len(names), strings.Join(names[:planLogNames], ","))
}
