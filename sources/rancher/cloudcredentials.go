package rancher

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/rancher/norman/clientbase"
	"github.com/rancher/norman/types"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// CloudCredential is the part of a Rancher v3 cloud credential this source
// reads: its id and its Azure subscription. rancher/rancher's generated type
// (pkg/client/generated/management/v3 CloudCredential) lacks the per-driver
// configs, which Rancher adds to the schema at run time: azurecredentialConfig
// holds clientId, environment, subscriptionId and tenantId (clientSecret is
// a password field, never returned). Nothing but the subscription is
// decoded.
type CloudCredential struct {
	// ID is namespace:name (cattle-global-data:cc-q7t2w), what
	// aksConfig.azureCredentialSecret names.
	ID    string                 `json:"id"`
	Azure *AzureCredentialConfig `json:"azurecredentialConfig,omitempty"`
}

// AzureCredentialConfig is the part of azurecredentialConfig this source
// reads.
type AzureCredentialConfig struct {
	SubscriptionID string `json:"subscriptionId,omitempty"`
}

// cloudCredentialCollection is one page of GET /v3/cloudcredentials.
type cloudCredentialCollection struct {
	types.Collection
	Data []CloudCredential `json:"data"`
}

// subscriptions maps the id of an Azure cloud credential to its
// subscription.
type subscriptions map[string]string

// add records the subscriptions of creds. A credential with no id, no Azure
// config or a subscription that is not a GUID is left out: its clusters get
// no CloudID rather than a wrong one.
func (s subscriptions) add(creds []CloudCredential) {
	for _, c := range creds {
		if c.ID == "" || c.Azure == nil {
			continue
		}
		if sub := strings.TrimSpace(c.Azure.SubscriptionID); isGUID(sub) {
			s[c.ID] = strings.ToLower(sub)
		}
	}
}

// isGUID reports whether s has the shape of an Azure subscription id,
// 8-4-4-4-12 hexadecimal digits.
func isGUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, r := range s {
		switch i {
		case 8, 13, 18, 23:
			if r != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
				return false
			}
		}
	}
	return true
}

// errCredentialsForbidden is a 403 on /v3/cloudcredentials: the user may
// not read cloud credentials. Unlike a 403 on clusters, the token is fine.
var errCredentialsForbidden = errors.New("rancher answered 403 Forbidden: the user may not read cloud credentials")

func (c *cloudCredentialCollection) collection() *types.Collection { return &c.Collection }
func (c *cloudCredentialCollection) items() int                    { return len(c.Data) }

// cloudCredentials reads the subscriptions of every page of
// /v3/cloudcredentials, as clusters does. Rancher lists the credentials the
// user may read: its own, or all of them for an administrator.
func (l *listing) cloudCredentials() (subscriptions, error) {
	subs := subscriptions{}
	err := followPages(listingPager[*cloudCredentialCollection](l), opCloudCredentials, "get /v3/cloudcredentials",
		func(col *cloudCredentialCollection) error {
			return l.ops.DoGet(l.s.apiURL+"/cloudcredentials", &types.ListOpts{Filters: map[string]any{"limit": l.s.cfg.PageLimit}}, col)
		},
		func(what string, col *cloudCredentialCollection, err error) error {
			var apiErr *clientbase.APIError
			switch {
			case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusForbidden:
				err = failed(upstream.KindAuth, opCloudCredentials, fmt.Errorf("%s: %w", what, errCredentialsForbidden))
			case err != nil:
				err = l.fail(opCloudCredentials, what, err)
			case col.Type != "collection":
				err = invalid(opCloudCredentials, "%s: the answer is not a collection", what)
			}
			l.s.metrics.Request(opCloudCredentials, err)
			if err == nil {
				subs.add(col.Data)
			}
			return err
		})
	if err != nil {
		return nil, err
	}
	return subs, nil
}

// aksSubscriptions returns the subscriptions of the cloud credentials for
// the hosted AKS clusters among kept (the clusters the filters keep), or nil
// without a request when none names a credential. The identity is best
// effort, and sticky: a credential's subscription, once read, is kept until
// an answer gives it another, or a successful read comes when no listed
// cluster names it (a successful read keeps the subscriptions of the
// answer and, of those it lacks, the ones listed clusters name).
// A 403 (the user may not read cloud credentials, a debug line) or any other
// failure (a warning) uses the subscriptions last read, and a credential an
// answer leaves out (deleted, or no longer readable by the user) or gives no
// valid subscription keeps the one last read: a cluster's subscription does
// not change, and losing it for a listing would strip the cluster's
// aks-subscription label and split it from its AKS twin (two servers for one
// cluster, then one gone). A credential this process never read gives its
// clusters no subscription (the inventory keeps a served cluster's, see
// sources.Cluster.AccountLabel). Only the end of the listing's own context
// fails the listing.
func (s *Source) aksSubscriptions(l *listing, kept []*Cluster) (subscriptions, error) {
	refs := map[string]int{} // credential → clusters naming it
	total := 0
	for _, c := range kept {
		if ref := aksCredential(c); ref != "" {
			refs[ref]++
			total++
		}
	}
	if total == 0 {
		return nil, nil
	}
	subs, err := l.cloudCredentials()
	switch {
	case err == nil:
	case l.ctx.Err() != nil:
		return nil, err
	case errors.Is(err, errCredentialsForbidden):
		s.log.Debug("the user may not read cloud credentials: hosted AKS clusters keep the subscriptions last read, if any",
			"clusters", total, "kept", withSubscription(refs, s.subs))
		return s.subs, nil
	default:
		s.log.Warn("cannot read cloud credentials: hosted AKS clusters keep the subscriptions last read, if any",
			"error", err, "clusters", total, "kept", withSubscription(refs, s.subs))
		return s.subs, nil
	}
	var missing, stale []string
	for ref := range refs {
		if _, ok := subs[ref]; ok {
			continue
		}
		if sub, ok := s.subs[ref]; ok {
			subs[ref] = sub
			stale = append(stale, ref)
		} else {
			missing = append(missing, ref)
		}
	}
	s.subs = subs
	if len(stale) > 0 {
		slices.Sort(stale)
		s.log.Debug("cloud credentials left out or without an azure subscription; the subscriptions last read are kept",
			"credentials", stale)
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		s.log.Debug("cloud credentials not found or without an azure subscription: the source gives their hosted AKS clusters no subscription",
			"credentials", missing, "clusters", total-withSubscription(refs, subs))
	}
	return subs, nil
}

// withSubscription counts the clusters of refs whose credential has a
// subscription in subs.
func withSubscription(refs map[string]int, subs subscriptions) int {
	n := 0
	for ref, k := range refs {
		if _, ok := subs[ref]; ok {
			n += k
		}
	}
	return n
}
