package rancher

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// hostedEKS is a hosted EKS cluster as GET /v3/clusters returns it (trimmed
// to the identity), created by Rancher with a service role of its own:
// eksConfig.serviceRole is the role's name, as eks-operator takes it, and
// eksStatus.upstreamSpec.serviceRole the role's ARN, as EKS returns it
// (eks-operator controller/external.go BuildUpstreamClusterState).
const hostedEKS = `{
  "apiEndpoint": "https://6F1C2B3A4D5E6F708192A3B4C5D6E7F8.gr7.us-east-1.eks.amazonaws.com",
  "driver": "EKS",
  "eksConfig": {
    "amazonCredentialSecret": "cattle-global-data:cc-9vb2x",
    "displayName": "prod-eks",
    "imported": false,
    "kmsKey": "arn:aws:kms:us-east-1:999999999999:key/0c2f0e33-2b4f-4f6a-9d8e-5b7a1c3d9e10",
    "region": "us-east-1",
    "serviceRole": "prod-eks-cluster-role",
    "type": "/v3/schemas/eksClusterConfigSpec"
  },
  "eksStatus": {
    "generatedNodeRole": "arn:aws:iam::123456789012:role/prod-eks-node-instance-role-NodeInstanceRole-1X2Y3Z",
    "managedLaunchTemplateID": "lt-0a1b2c3d4e5f67890",
    "privateRequiresTunnel": null,
    "type": "/v3/schemas/eksStatus",
    "upstreamSpec": {
      "amazonCredentialSecret": "cattle-global-data:cc-9vb2x",
      "displayName": "prod-eks",
      "imported": false,
      "kmsKey": "arn:aws:kms:us-east-1:999999999999:key/0c2f0e33-2b4f-4f6a-9d8e-5b7a1c3d9e10",
      "kubernetesVersion": "1.33",
      "region": "us-east-1",
      "secretsEncryption": true,
      "serviceRole": "arn:aws:iam::123456789012:role/prod-eks-cluster-role",
      "type": "/v3/schemas/eksClusterConfigSpec"
    },
    "virtualNetwork": "vpc-0f1e2d3c4b5a69788"
  },
  "id": "c-9kq4z",
  "labels": {"provider.cattle.io": "eks"},
  "localClusterAuthEndpoint": {"enabled": false, "type": "/v3/schemas/localClusterAuthEndpoint"},
  "name": "prod-eks",
  "provider": "eks",
  "state": "active"
}`

// hostedAKS is an imported AKS cluster as GET /v3/clusters returns it
// (trimmed). Neither aksConfig nor aksStatus.upstreamSpec holds the
// subscription or the cluster's resource id; the node pool's subnet id
// names a subscription, but only the virtual network's.
const hostedAKS = `{
  "aksConfig": {
    "azureCredentialSecret": "cattle-global-data:cc-q7t2w",
    "clusterName": "aks-payments",
    "imported": true,
    "resourceGroup": "RG-Payments",
    "resourceLocation": "westeurope",
    "type": "/v3/schemas/aksClusterConfigSpec"
  },
  "aksStatus": {
    "privateRequiresTunnel": null,
    "rbacEnabled": true,
    "type": "/v3/schemas/aksStatus",
    "upstreamSpec": {
      "azureCredentialSecret": "cattle-global-data:cc-q7t2w",
      "clusterName": "aks-payments",
      "dnsPrefix": "aks-payments-dns",
      "imported": true,
      "kubernetesVersion": "1.32.6",
      "managedIdentity": true,
      "nodePools": [{"count": 3, "mode": "System", "name": "system", "osType": "Linux", "vmSize": "Standard_D4s_v5",
        "vnetSubnetID": "/subscriptions/99999999-8888-7777-6666-555555555555/resourceGroups/rg-network/providers/Microsoft.Network/virtualNetworks/hub/subnets/aks"}],
      "resourceGroup": "RG-Payments",
      "resourceLocation": "westeurope",
      "type": "/v3/schemas/aksClusterConfigSpec"
    }
  },
  "driver": "AKS",
  "id": "c-t8w2m",
  "labels": {"provider.cattle.io": "aks"},
  "localClusterAuthEndpoint": {"enabled": false, "type": "/v3/schemas/localClusterAuthEndpoint"},
  "name": "aks-payments",
  "provider": "aks",
  "state": "active"
}`

// decodeHosted decodes doc as a listing does, after edit changes its
// generic form.
func decodeHosted(t *testing.T, doc string, edit func(o map[string]any)) Cluster {
	t.Helper()
	var o map[string]any
	require.NoError(t, json.Unmarshal([]byte(doc), &o))
	if edit != nil {
		edit(o)
	}
	b, err := json.Marshal(o)
	require.NoError(t, err)
	var c Cluster
	require.NoError(t, json.Unmarshal(b, &c))
	return c
}

// at returns the object at the path of keys in o.
func at(o map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		o = o[k].(map[string]any)
	}
	return o
}

// identity is the part of a mapped cluster that hostedIdentity sets, and
// the endpoint label.
type identity struct {
	CloudID, Account, Region string
	Labels, Annotations      map[string]string
}

func identityOf(c sources.Cluster) identity {
	out := identity{CloudID: c.CloudID, Account: c.Account, Region: c.Region}
	pick := func(in map[string]string) map[string]string {
		var m map[string]string
		for _, k := range []string{LabelEKSName, LabelEKSRegion, LabelEKSAccount, LabelAKSName, LabelAKSResourceGroup,
			LabelAKSLocation, LabelAKSSubscription, LabelEndpoint} {
			if v, ok := in[k]; ok {
				if m == nil {
					m = map[string]string{}
				}
				m[k] = v
			}
		}
		return m
	}
	out.Labels, out.Annotations = pick(c.Labels), pick(c.Annotations)
	return out
}

// identityCase is a hosted cluster document, edited, mapped with subs.
type identityCase struct {
	name string
	doc  string
	edit func(o map[string]any)
	subs subscriptions
	want identity
}

func checkIdentity(t *testing.T, cases []identityCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := decodeHosted(t, tc.doc, tc.edit)
			got := testMapper(nil).toCluster(&c, newRancherCA(rancherCAPEM), tc.subs)
			assert.Equal(t, tc.want, identityOf(got))
			// named with or without an account, so that the inventory can
			// keep the last one in it (sources.Cluster.AccountLabel)
			wantLabel := map[string]string{"EKS": LabelEKSAccount, "AKS": LabelAKSSubscription}[strings.ToUpper(c.Driver)]
			assert.Equal(t, wantLabel, got.AccountLabel)
			assert.True(t, got.Ready, got.NotReadyReason)
		})
	}
}

// aksLabels are the identity labels of hostedAKS, with the subscription
// when sub is set.
func aksLabels(sub string) map[string]string {
	l := map[string]string{LabelAKSName: "aks-payments", LabelAKSResourceGroup: "RG-Payments",
		LabelAKSLocation: "westeurope", LabelEndpoint: EndpointProxy}
	if sub != "" {
		l[LabelAKSSubscription] = sub
	}
	return l
}

func TestHostedIdentity(t *testing.T) {
	const (
		eksCloudID = "eks/123456789012/us-east-1/prod-eks"
		account    = "123456789012"
	)
	eksLabels := func(account string) map[string]string {
		l := map[string]string{LabelEKSName: "prod-eks", LabelEKSRegion: "us-east-1", LabelEndpoint: EndpointProxy}
		if account != "" {
			l[LabelEKSAccount] = account
		}
		return l
	}
	checkIdentity(t, []identityCase{
		{name: "EKS: account from the role ARN in upstreamSpec, not the role name in eksConfig", doc: hostedEKS,
			want: identity{CloudID: eksCloudID, Account: account, Region: "us-east-1", Labels: eksLabels(account)}},
		{name: "EKS imported: no role in eksConfig at all", doc: hostedEKS,
			edit: func(o map[string]any) { delete(at(o, "eksConfig"), "serviceRole") },
			want: identity{CloudID: eksCloudID, Account: account, Region: "us-east-1", Labels: eksLabels(account)}},
		{name: "EKS GovCloud partition", doc: hostedEKS, edit: func(o map[string]any) {
			at(o, "eksConfig")["region"] = "us-gov-west-1"
			at(o, "eksStatus", "upstreamSpec")["serviceRole"] = "arn:aws-us-gov:iam::123456789012:role/prod-eks-cluster-role"
		}, want: identity{CloudID: "eks/123456789012/us-gov-west-1/prod-eks", Account: account, Region: "us-gov-west-1",
			Labels: map[string]string{LabelEKSName: "prod-eks", LabelEKSRegion: "us-gov-west-1", LabelEKSAccount: account,
				LabelEndpoint: EndpointProxy}}},
		{name: "EKS before Rancher's first refresh: no upstreamSpec, no account, no CloudID", doc: hostedEKS,
			edit: func(o map[string]any) { at(o, "eksStatus")["upstreamSpec"] = nil },
			want: identity{Region: "us-east-1", Labels: eksLabels("")}},
		{name: "EKS: an ARN in eksConfig.serviceRole is not read", doc: hostedEKS, edit: func(o map[string]any) {
			at(o, "eksConfig")["serviceRole"] = "arn:aws:iam::123456789012:role/prod-eks-cluster-role"
			delete(o, "eksStatus")
		}, want: identity{Region: "us-east-1", Labels: eksLabels("")}},
		{name: "EKS: upstreamSpec alone names the cluster", doc: hostedEKS,
			edit: func(o map[string]any) { o["eksConfig"] = nil },
			want: identity{CloudID: eksCloudID, Account: account, Region: "us-east-1", Labels: eksLabels(account)}},
		{name: "EKS: a name too long for a label is an annotation", doc: hostedEKS, edit: func(o map[string]any) {
			at(o, "eksConfig")["displayName"] = strings.Repeat("n", 70)
		}, want: identity{CloudID: "eks/123456789012/us-east-1/" + strings.Repeat("n", 70), Account: account,
			Region: "us-east-1", Annotations: map[string]string{LabelEKSName: strings.Repeat("n", 70)},
			Labels: map[string]string{LabelEKSRegion: "us-east-1", LabelEKSAccount: account, LabelEndpoint: EndpointProxy}}},
		{name: "AKS: no subscription in the cluster object, no CloudID without its credential's", doc: hostedAKS,
			want: identity{Region: "westeurope", Labels: aksLabels("")}},
		{name: "AKS: a pre-release subscriptionId is not read", doc: hostedAKS, edit: func(o map[string]any) {
			at(o, "aksConfig")["subscriptionId"] = "00000000-1111-2222-3333-444444444444"
		}, want: identity{Region: "westeurope", Labels: aksLabels("")}},
		{name: "AKS: upstreamSpec alone names the cluster", doc: hostedAKS,
			edit: func(o map[string]any) { delete(o, "aksConfig") },
			want: identity{Region: "westeurope", Labels: aksLabels("")}},
		{name: "not hosted: an EKS config under another driver is not read", doc: hostedEKS,
			edit: func(o map[string]any) { o["driver"] = "imported" },
			want: identity{Labels: map[string]string{LabelEndpoint: EndpointProxy}}},
	})
}

// TestHostedAKSIdentity checks the subscription a hosted AKS cluster takes
// from the cloud credentials read in the listing (subs), and its CloudID.
func TestHostedAKSIdentity(t *testing.T) {
	const sub = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
	subs := subscriptions{"cattle-global-data:cc-q7t2w": sub, "cattle-global-data:cc-other": "11111111-2222-3333-4444-555555555555"}
	cloudID := sources.AKSCloudID(sub, "RG-Payments", "aks-payments")
	withSub := identity{CloudID: cloudID, Account: sub, Region: "westeurope", Labels: aksLabels(sub)}
	without := identity{Region: "westeurope", Labels: aksLabels("")}
	checkIdentity(t, []identityCase{
		{name: "the subscription of the cloud credential aksConfig names", doc: hostedAKS, subs: subs, want: withSub},
		{name: "the credential of upstreamSpec when aksConfig names none", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) { delete(at(o, "aksConfig"), "azureCredentialSecret") }, want: withSub},
		{name: "upstreamSpec alone names the cluster", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) { delete(o, "aksConfig") }, want: withSub},
		{name: "aksConfig's credential wins over upstreamSpec's", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) {
				at(o, "aksStatus", "upstreamSpec")["azureCredentialSecret"] = "cattle-global-data:cc-other"
			}, want: withSub},
		{name: "a credential not read: no CloudID", doc: hostedAKS,
			subs: subscriptions{"cattle-global-data:cc-zzzzz": sub}, want: without},
		{name: "no credential read at all: no CloudID", doc: hostedAKS, want: without},
		{name: "no credential named: no CloudID", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) {
				delete(at(o, "aksConfig"), "azureCredentialSecret")
				delete(at(o, "aksStatus", "upstreamSpec"), "azureCredentialSecret")
			}, want: without},
		{name: "no resource group: the subscription, no CloudID", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) {
				delete(at(o, "aksConfig"), "resourceGroup")
				delete(at(o, "aksStatus", "upstreamSpec"), "resourceGroup")
			},
			want: identity{Account: sub, Region: "westeurope", Labels: map[string]string{LabelAKSName: "aks-payments",
				LabelAKSLocation: "westeurope", LabelAKSSubscription: sub, LabelEndpoint: EndpointProxy}}},
		{name: "not hosted: an AKS credential under another driver is not read", doc: hostedAKS, subs: subs,
			edit: func(o map[string]any) { o["driver"] = "imported" },
			want: identity{Labels: map[string]string{LabelEndpoint: EndpointProxy}}},
	})
}

// TestHostedEKSCloudIDIsTheEKSSources checks that a hosted EKS cluster has
// the CloudID the eks source gives the same cluster (account, region and
// EKS name), so that the inventory serves it once; and that auto serves it
// through the proxy, as it has no authorized cluster endpoint.
func TestHostedEKSCloudIDIsTheEKSSources(t *testing.T) {
	c := decodeHosted(t, hostedEKS, nil)
	got := testMapper(aceAuto).toCluster(&c, newRancherCA(rancherCAPEM), nil)
	assert.Equal(t, sources.EKSCloudID("123456789012", "us-east-1", "prod-eks"), got.CloudID)
	assert.Equal(t, server+"/k8s/clusters/c-9kq4z", got.Server)
	assert.True(t, got.Ready, got.NotReadyReason)

	c = decodeHosted(t, hostedEKS, func(o map[string]any) { at(o, "eksConfig")["displayName"] = "Prod-EKS" })
	assert.Equal(t, sources.EKSCloudID("123456789012", "us-east-1", "Prod-EKS"),
		testMapper(nil).toCluster(&c, rancherCA{}, nil).CloudID, "case as the eks source writes it")
}

func TestAccountFromARN(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:iam::210987654321:role/staging-eks-cluster-role": "210987654321",
		"arn:aws-cn:iam::210987654321:role/x":                     "210987654321",
		"arn:aws:iam::21098765432:role/x":                         "",
		"arn:aws:iam::abcdefghijkl:role/x":                        "",
		"staging-eks-cluster-role":                                "",
		"":                                                        "",
	} {
		assert.Equal(t, want, accountFromARN(in), in)
	}
}
