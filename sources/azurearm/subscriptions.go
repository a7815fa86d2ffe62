package azurearm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	"golang.org/x/sync/errgroup"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Subscription is one subscription to list: its lower-cased id and, when
// subscriptions are discovered, its state (empty when configured).
type Subscription struct {
	ID    string
	State armsubscriptions.SubscriptionState
}

// Subscriptions returns the configured subscriptions (configured, lower-cased),
// or, when the client discovers them, every one the identity can see
// except Deleted ones (logged at debug level): Enabled, PastDue and
// Warned subscriptions run their resources, and a Disabled one still
// answers GET, its clusters listed as degraded (see InSubscription). A
// state this package does not know is listed too: listing is only a GET,
// and leaving its clusters out would make them look gone.
//
// A subscription that drops out of the list makes its clusters absent
// from the listing, and Scopes no longer names its resource groups: the
// inventory holds their departure until an operator confirms it. None visible at all is an
// error (kind auth): an identity that lost its role assignments must not
// make every cluster disappear.
func (c *Client) Subscriptions(ctx context.Context, configured []string, log *slog.Logger) ([]Subscription, error) {
	if c.Subs == nil {
		out := make([]Subscription, len(configured))
		for i, id := range configured {
			out[i] = Subscription{ID: strings.ToLower(id)}
		}
		return out, nil
	}
	var out []Subscription
	err := Walk(ctx, OpSubscriptions, c.Subs.NewListPager(nil),
		func(p armsubscriptions.ClientListResponse) ([]*armsubscriptions.Subscription, *string) {
			return p.Value, p.NextLink
		},
		func(sub *armsubscriptions.Subscription) error {
			if sub == nil || sub.SubscriptionID == nil || !IsGUID(*sub.SubscriptionID) {
				return Malformed(OpSubscriptions, errors.New("a subscription without a valid subscriptionId"))
			}
			id, state := strings.ToLower(*sub.SubscriptionID), Deref(sub.State)
			if strings.EqualFold(string(state), string(armsubscriptions.SubscriptionStateDeleted)) {
				log.Debug("subscription skipped", "subscription", id, "state", string(state))
				return nil
			}
			if !slices.ContainsFunc(out, func(o Subscription) bool { return o.ID == id }) {
				out = append(out, Subscription{ID: id, State: state})
			}
			return nil
		})
	if err == nil && len(out) == 0 {
		err = &upstream.Error{Kind: upstream.KindAuth, Operation: OpSubscriptions,
			Msg: "no subscription is visible to the identity (Deleted ones are not listed)"}
	}
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	return out, nil
}

// flagged reports whether the subscription's state is one the clusters
// carry in an annotation: known (discovered) and not Enabled.
func (s Subscription) flagged() bool {
	return s.State != "" && !strings.EqualFold(string(s.State), string(armsubscriptions.SubscriptionStateEnabled))
}

// Mark adjusts a cluster listed in the subscription to its state: its
// phase (InSubscription) and, when the state is known and not Enabled,
// the provider's annotation key holding it.
func (s Subscription) Mark(c *sources.Cluster, annotation string) {
	c.Phase = InSubscription(c.Phase, s.State)
	if s.flagged() {
		c.Annotations[annotation] = string(s.State)
	}
}

// InSubscription adjusts a cluster's phase to the state of the
// subscription it was listed in: a Disabled subscription has its resources
// deallocated, so every cluster in it is degraded unless it is leaving.
// Other states (Enabled, PastDue, Warned: resources run) change nothing.
func InSubscription(p sources.Phase, state armsubscriptions.SubscriptionState) sources.Phase {
	if strings.EqualFold(string(state), string(armsubscriptions.SubscriptionStateDisabled)) && p != sources.PhaseLeaving {
		return sources.PhaseDegraded
	}
	return p
}

// EachSubscription runs list on every subscription of subs, at most limit
// at once, and returns what each returned, in the order of subs. A
// subscription in a state other than Enabled is logged at debug level
// before it is listed. The first failure cancels the others and is
// returned as "subscription <id>: list clusters: <failure>".
func EachSubscription[M any](ctx context.Context, log *slog.Logger, subs []Subscription, limit int,
	list func(context.Context, Subscription) ([]M, error)) ([][]M, error) {
	out := make([][]M, len(subs))
	err := Parallel(ctx, len(subs), limit, func(ctx context.Context, i int) error {
		sub := subs[i]
		if sub.flagged() {
			log.Debug("subscription listed in a state other than Enabled", "subscription", sub.ID, "state", string(sub.State))
		}
		var err error
		if out[i], err = list(ctx, sub); err != nil {
			return fmt.Errorf("subscription %s: list clusters: %w", sub.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Parallel runs fn(ctx, i) for i in [0, n) with at most limit at once. The
// first error cancels the context of the others and is returned.
func Parallel(ctx context.Context, n, limit int, fn func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(limit)
	for i := range n {
		g.Go(func() error { return fn(ctx, i) })
	}
	return g.Wait()
}

// Listed is what a listing counts and logs of each cluster it listed.
type Listed struct {
	// Subscription, ResourceGroup and Name say where the cluster is.
	Subscription, ResourceGroup, Name string
	// State is its provisioningState ("unknown" when there is none),
	// counted before the filters.
	State string
	// Skip says why a filter left it out; "" keeps it.
	Skip SkipReason
	// Detail says more of the skip, for the debug log.
	Detail string
}

// Counts are the per-listing counts of the gauges: every cluster by its
// upstream state, and the skipped ones by reason (SetListed).
type Counts struct {
	States, Skipped map[string]int
}

// Kept returns the clusters of perSub that no filter skipped, in order,
// and the counts of all of them; about says what a cluster is. Each skip
// is logged at debug level.
func Kept[M any](log *slog.Logger, perSub [][]M, about func(*M) Listed) ([]*M, Counts) {
	var kept []*M
	n := Counts{States: map[string]int{}, Skipped: map[string]int{}}
	for _, ms := range perSub {
		for i := range ms {
			m := &ms[i]
			a := about(m)
			n.States[a.State]++
			if a.Skip != "" {
				n.Skipped[string(a.Skip)]++
				log.Debug("cluster skipped", "cluster", a.Name, "resourceGroup", a.ResourceGroup,
					"subscription", a.Subscription, "reason", string(a.Skip), "detail", a.Detail)
				continue
			}
			kept = append(kept, m)
		}
	}
	return kept, n
}
