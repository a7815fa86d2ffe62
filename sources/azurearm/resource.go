package azurearm

import (
	"errors"
	"fmt"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
)

// ClusterID parses id, the resource id of a cluster listed in
// subscription sub: a resource of resourceType (compared
// case-insensitively, as ARM does), with a resource group and a name, in
// sub. An error means a malformed response; what names the resource type
// in it ("a managed cluster").
func ClusterID(sub string, id *string, resourceType, what string) (*arm.ResourceID, error) {
	if id == nil {
		return nil, errors.New("cluster without id")
	}
	rid, err := arm.ParseResourceID(*id)
	if err != nil {
		return nil, fmt.Errorf("cluster id %q: %w", *id, err)
	}
	if !strings.EqualFold(rid.ResourceType.String(), resourceType) || rid.ResourceGroupName == "" || rid.Name == "" {
		return nil, fmt.Errorf("cluster id %q is not %s", *id, what)
	}
	if !strings.EqualFold(rid.SubscriptionID, sub) {
		return nil, fmt.Errorf("cluster id %q is outside the subscription", *id)
	}
	return rid, nil
}
