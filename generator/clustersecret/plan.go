package clustersecret

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

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

// PruneOptions make deletion slow and bounded.
type PruneOptions struct {
	// AfterListings is how many consecutive complete listings of its
	// source a cluster must be absent from before its Secret is deleted.
	AfterListings int
	// GracePeriod, when set, must also have passed since the cluster was
	// first seen missing.
	GracePeriod time.Duration
	// MaxDeletions and MaxDeletionsPercent form the breaker: a pass that
	// would delete more than max(MaxDeletions, MaxDeletionsPercent% of our
	// Secrets) deletes nothing and reports the deletions as blocked.
	MaxDeletions        int
	MaxDeletionsPercent float64
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
	// By is "name", "server" or "identity".
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
//	                                                                    foreign one its server: clash)
//	found by identity, content differs  served                          update in place (not under create-only)
//	found by identity, content equal    served                          nothing
//	foreign Secret, same server         served, ours exists             clash: reported, ours left as it is
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
	owned := map[string]*Record{}
	byIdentity := map[string]*Record{}
	byLegacyName := map[string]*Record{}
	foreignByName := map[string]*Record{}
	foreignByServer := map[string]*Record{}
	for _, s := range in.Current {
		if s.owned(in.OwnerID) {
			owned[s.Name] = s
			if id := s.clusterID; id != "" {
				byIdentity[Identity(s.Label(LabelSource), id)] = s
			} else {
				byLegacyName[Identity(s.Label(LabelSource), s.cluster)] = s
			}
			continue
		}
		foreignByName[s.Name] = s
		if srv := strings.TrimRight(s.server, "/"); srv != "" && s.Label(LabelSecretType) == "cluster" {
			foreignByServer[srv] = s
		}
	}

	matched := map[string]bool{}
	for _, d := range in.Desired {
		cur := byIdentity[Identity(d.Source, d.ID)]
		if cur == nil {
			cur = byLegacyName[Identity(d.Source, d.Cluster)]
		}
		if cur != nil && matched[cur.Name] {
			cur = nil // a legacy Secret already taken by another cluster of that name
		}
		if cur == nil {
			switch {
			case foreignByName[d.name] != nil:
				ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: d.name, By: "name"})
			case foreignByServer[d.server] != nil:
				ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: foreignByServer[d.server].Name, By: "server"})
			case owned[d.name] != nil:
				ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: d.name, By: "identity"})
				matched[d.name] = true // another cluster's: never updated, never pruned for this one
			default:
				ch.Create = append(ch.Create, d)
			}
			continue
		}
		matched[cur.Name] = true
		if f := foreignByServer[d.server]; f != nil {
			ch.Clashes = append(ch.Clashes, Clash{Cluster: d.Cluster, Secret: f.Name, By: "server"})
			clearCountdown(&ch, cur)
			continue
		}
		switch {
		case upToDate(cur, &d):
			ch.Unchanged++
		case in.Policy == PolicyCreateOnly:
			ch.Unchanged++
		default: // in place: an upgrade or a rename keeps the Secret
			ch.Update = append(ch.Update, Update{Old: cur, Want: &d, Reason: "content"})
		}
	}

	listed := listedIdentities(in.Snapshot)
	total := len(in.Current) - len(foreignByName)
	var deletions []*Record
	for _, name := range sortedSecretNames(owned) {
		s := owned[name]
		if matched[name] {
			continue
		}
		cluster, source, id := s.cluster, s.Label(LabelSource), s.clusterID
		ident := Identity(source, id)
		if id == "" {
			ident = ""
		}
		departed := id != "" && in.Snapshot.HasDeparted(source, id)
		switch {
		case departed:
		case in.Held[ident], ident != "" && listed[ident] && !in.Deselected[ident], in.Snapshot.Present(cluster) && !in.Deselected[ident]:
			clearCountdown(&ch, s)
			continue
		}
		p := countdown(s, cluster, source, in)
		st, configured := in.Snapshot.Source(source)
		switch {
		case s.Label(LabelPin) == "true":
			p.Held = "pinned"
		case in.Policy != PolicySync:
			p.Held = "policy " + string(in.Policy) + " never deletes"
		case departed:
		case !configured:
			p.Held = "source not configured"
		case !st.Synced:
			p.Held = "source has not completed a listing"
		case st.Stale:
			p.Held = "latest listing of the source failed"
		}
		if p.Held != "" {
			if p.Missed > 0 || departed {
				ch.Pending = append(ch.Pending, p)
			}
			ch.Unchanged++
			continue
		}
		if departed || p.Missed >= p.Needed && !in.Now.Before(p.DeleteAt) {
			deletions = append(deletions, s)
			continue
		}
		ch.Pending = append(ch.Pending, p)
		if cd := countdownOf(p, in.Listings[source]); !maps.Equal(s.countdown, cd) {
			ch.Update = append(ch.Update, countdownUpdate(s, cd))
		} else {
			ch.Unchanged++
		}
	}
	limit := max(in.Prune.MaxDeletions, int(math.Ceil(float64(total)*in.Prune.MaxDeletionsPercent/100)))
	if len(deletions) > limit {
		ch.Blocked = deletions
	} else {
		ch.Delete = deletions
	}
	return ch
}

// listedIdentities are the clusters the snapshot lists in any form, by
// Identity: served or unserved. (Conflicts and duplicates are found by
// name, with Snapshot.Present.)
func listedIdentities(snap *inventory.Snapshot) map[string]bool {
	out := make(map[string]bool, len(snap.Clusters)+len(snap.Unserved))
	for _, c := range snap.Clusters {
		out[Identity(c.Source, c.Key())] = true
	}
	for _, u := range snap.Unserved {
		out[Identity(u.Source, u.ID)] = true
	}
	return out
}

// Owned reports whether s carries our managed-by label and owner id.
func Owned(s *corev1.Secret, ownerID string) bool {
	return s.Labels[LabelManagedBy] == ManagedByValue && s.Labels[LabelOwner] == ownerID && ownerID != ""
}

// countdown reads the countdown of s as it would be after this pass.
func countdown(s *Record, cluster, source string, in Input) Pending {
	p := Pending{Secret: s.Name, Cluster: cluster, Source: source, Needed: max(in.Prune.AfterListings, 1)}
	since, err := time.Parse(time.RFC3339Nano, s.countdown[AnnotationMissingSince])
	missed, _ := strconv.Atoi(s.countdown[AnnotationMissingListings])
	last, _ := time.Parse(time.RFC3339Nano, s.countdown[AnnotationMissingListing])
	listing, ok := in.Listings[source]
	st, _ := in.Snapshot.Source(source)
	advancing := ok && st.Synced && !st.Stale
	switch {
	case err != nil || missed < 1:
		p.Since, p.Missed = in.Now, 0
		if advancing {
			p.Missed = 1
		}
	default:
		p.Since, p.Missed = since, missed
		if advancing && listing.After(last) {
			p.Missed++
		}
	}
	if in.Prune.GracePeriod > 0 {
		p.DeleteAt = p.Since.Add(in.Prune.GracePeriod)
	}
	return p
}

// countdownOf returns the countdown annotations of p, counted at listing.
func countdownOf(p Pending, listing time.Time) map[string]string {
	return map[string]string{
		AnnotationMissingSince:    p.Since.UTC().Format(time.RFC3339Nano),
		AnnotationMissingListings: strconv.Itoa(p.Missed),
		AnnotationMissingListing:  listing.UTC().Format(time.RFC3339Nano),
	}
}

// countdownUpdate sets the countdown annotations of s to cd (none: cleared).
func countdownUpdate(s *Record, cd map[string]string) Update {
	return Update{Old: s, Countdown: cd, Reason: "countdown"}
}

func clearCountdown(ch *Changes, s *Record) {
	if _, ok := s.countdown[AnnotationMissingSince]; !ok {
		ch.Unchanged++
		return
	}
	ch.Update = append(ch.Update, countdownUpdate(s, nil))
}

// merge returns cur with the keys, labels and annotations we own set as in
// want: propagated labels and annotations that left upstream are removed,
// anything a person added is kept, and a prune countdown is cleared.
func merge(cur, want *corev1.Secret) *corev1.Secret {
	out := cur.DeepCopy()
	if out.Data == nil {
		out.Data = map[string][]byte{}
	}
	for _, k := range ownedDataKeys {
		if v, ok := want.Data[k]; ok {
			out.Data[k] = v
		} else {
			delete(out.Data, k)
		}
	}
	out.Labels = mergeMap(out.Labels, want.Labels, cur.Annotations[AnnotationLabels])
	out.Annotations = mergeMap(out.Annotations, want.Annotations, cur.Annotations[AnnotationAnnotations])
	delete(out.Annotations, AnnotationMissingSince)
	delete(out.Annotations, AnnotationMissingListings)
	delete(out.Annotations, AnnotationMissingListing)
	if _, ok := want.Labels[LabelState]; !ok {
		delete(out.Labels, LabelState)
	}
	return out
}

func mergeMap(cur, want map[string]string, previouslyPropagated string) map[string]string {
	out := maps.Clone(cur)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range strings.Split(previouslyPropagated, ",") {
		if _, keep := want[k]; !keep && k != "" {
			delete(out, k)
		}
	}
	maps.Copy(out, want)
	return out
}

// sameContent compares what we write, not resourceVersion: a pass that
// changes nothing makes no write.
func sameContent(a, b *corev1.Secret) bool {
	return maps.EqualFunc(a.Data, b.Data, bytes.Equal) &&
		maps.Equal(a.Labels, b.Labels) && maps.Equal(a.Annotations, b.Annotations)
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
	var created, deleted, blocked []string
	for _, d := range c.Create {
		created = append(created, d.name)
	}
	for _, s := range c.Delete {
		deleted = append(deleted, s.Name)
	}
	for _, s := range c.Blocked {
		blocked = append(blocked, s.Name)
	}
	var upd []string
	for _, u := range c.Update {
		upd = append(upd, u.Old.Name+"("+u.Reason+")")
	}
	return fmt.Sprintf("create=[%s] update=[%s] delete=[%s] blocked=[%s] clashes=%d pending=%d unchanged=%d",
		strings.Join(created, ","), strings.Join(upd, ","), strings.Join(deleted, ","), strings.Join(blocked, ","),
		len(c.Clashes), len(c.Pending), c.Unchanged)
}
