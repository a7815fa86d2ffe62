package clustersecret

// The prune countdown of our Secrets whose cluster is not served.

import (
	"maps"
	"strconv"
	"time"
)

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

// planUnmatched plans our Secret s that no desired cluster claims, and
// reports whether it is to be deleted (subject to the breaker). Otherwise
// its countdown is started, counted, frozen or cleared (see Plan). A
// Secret is kept by the identity of its cluster, never by its name: a
// newcomer that takes a departed cluster's name keeps nothing of it.
func planUnmatched(ch *Changes, in *Input, s *Record) bool {
	cluster, source, id := s.cluster, s.Label(LabelSource), s.clusterID
	ident := Identity(source, id)
	if id == "" {
		ident = ""
	}
	departed := id != "" && in.Snapshot.HasDeparted(source, id)
	switch {
	case departed:
	case in.Held[ident], ident != "" && in.Snapshot.Knows(source, id) && !in.Deselected[ident],
		ident == "" && in.Snapshot.Present(cluster): // a Secret without an identity: by name

		clearCountdown(ch, s)
		return false
	}
	p := countdown(s, cluster, source, *in)
	p.Held = heldReason(s, in, source, departed)
	if p.Held != "" {
		if p.Missed > 0 || departed {
			ch.Pending = append(ch.Pending, p)
		}
		ch.Unchanged++
		return false
	}
	if departed || p.Missed >= p.Needed && !in.Now.Before(p.DeleteAt) {
		return true
	}
	ch.Pending = append(ch.Pending, p)
	if cd := countdownOf(p, in.Listings[source]); !maps.Equal(s.countdown, cd) {
		ch.Update = append(ch.Update, countdownUpdate(s, cd))
	} else {
		ch.Unchanged++
	}
	return false
}

// heldReason says why the Secret s of a cluster of source is not deleted
// however long its countdown ("" when nothing holds it).
func heldReason(s *Record, in *Input, source string, departed bool) string {
	st, configured := in.Snapshot.Source(source)
	switch {
	case s.Label(LabelPin) == "true":
		return "pinned"
	case in.Policy != PolicySync:
		return "policy " + string(in.Policy) + " never deletes"
	case departed:
	case !configured:
		return "source not configured"
	case !st.Synced:
		return "source has not completed a listing"
	case st.Stale:
		return "latest listing of the source failed"
	}
	return ""
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
