package azurearm

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v3"
)

// OpResourceGroups is the operation of a subscription's resource group
// list (see OpSubscriptions).
const OpResourceGroups = "resourceGroups.list"

// sdkResourceGroupsList is the SDK's name of the resource group list.
const sdkResourceGroupsList = "ResourceGroupsClient.NewListPager"

// Scope is the prefix of the lower-cased resource ids of everything in
// resource group rg of subscription sub: what a listing reports it
// covered (sources.AccountLister).
func Scope(sub, rg string) string {
	return "/subscriptions/" + strings.ToLower(sub) + "/resourcegroups/" + strings.ToLower(rg) + "/"
}

// Scopes lists the resource groups the identity can see in each of subs,
// at most limit subscriptions at once, and returns their Scopes. ARM
// answers a subscription's cluster list with the clusters of the resource
// groups the identity can read, so a role removed from a resource group
// takes its clusters out of a 200: the scopes tell that from a deletion.
// A failure fails the listing, as the cluster list's does.
func (c *Client) Scopes(ctx context.Context, subs []Subscription, limit int) ([]string, error) {
	per := make([][]string, len(subs))
	err := Parallel(ctx, len(subs), limit, func(ctx context.Context, i int) error {
		sub := subs[i].ID
		err := List(ctx, OpResourceGroups, c.groups, sub,
			func(rc *armresources.ResourceGroupsClient) *runtime.Pager[armresources.ResourceGroupsClientListResponse] {
				return rc.NewListPager(nil)
			},
			func(p armresources.ResourceGroupsClientListResponse) ([]*armresources.ResourceGroup, *string) {
				return p.Value, p.NextLink
			},
			func(rg *armresources.ResourceGroup) error {
				if rg == nil || Deref(rg.Name) == "" {
					return Malformed(OpResourceGroups, errors.New("a resource group without a name"))
				}
				per[i] = append(per[i], Scope(sub, *rg.Name))
				return nil
			})
		if err != nil {
			return fmt.Errorf("subscription %s: list resource groups: %w", sub, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, s := range per {
		out = append(out, s...)
	}
	c.groups.Forget(subs)
	return out, nil
}
