package azurearm

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions"
	subfake "github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armsubscriptions/fake"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

const (
	subA = "9b4d2f6e-1a3c-4e8b-b7d5-2c0f9e8a6d41"
	subB = "3e1f7a2c-8d4b-4c6e-9f0a-5b2d7c1e8a94"
	subC = "0b1f6471-1bf0-4dda-aec3-000000000003"
)

// debugLog is a logger at debug level writing to the returned buffer.
func debugLog() (*slog.Logger, *testlog.Buffer) {
	b := &testlog.Buffer{}
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}

// subscriptionsClient is a Client discovering subscriptions from the
// SDK's fake, which answers one page of these (id → state; nil id: a
// subscription without one), and counts the requests.
func subscriptionsClient(t *testing.T, subs [][2]*string) (*Client, *int) {
	t.Helper()
	calls := 0
	srv := &subfake.Server{NewListPager: func(*armsubscriptions.ClientListOptions) (resp azfake.PagerResponder[armsubscriptions.ClientListResponse]) {
		calls++
		var page armsubscriptions.ClientListResponse
		for _, s := range subs {
			page.Value = append(page.Value, &armsubscriptions.Subscription{SubscriptionID: s[0], State: (*armsubscriptions.SubscriptionState)(s[1])})
		}
		resp.AddPage(http.StatusOK, page, nil)
		return resp
	}}
	o := &arm.ClientOptions{}
	o.Transport = subfake.NewServerTransport(srv)
	c, err := NewClient(Identity{Cloud: "AzurePublic"}, true, Hooks{Credential: &azfake.TokenCredential{}, Options: o}, toyCounter(t))
	require.NoError(t, err)
	return c, &calls
}

func sub(id, state string) [2]*string { return [2]*string{&id, &state} }

func TestConfiguredSubscriptions(t *testing.T) {
	c, err := NewClient(Identity{Cloud: "AzurePublic"}, false, Hooks{Credential: &azfake.TokenCredential{}}, toyCounter(t))
	require.NoError(t, err)
	log, _ := debugLog()
	got, err := c.Subscriptions(context.Background(), []string{subA, "3E1F7A2C-8D4B-4C6E-9F0A-5B2D7C1E8A94"}, log)
	require.NoError(t, err)
	assert.Equal(t, []Subscription{{ID: subA}, {ID: subB}}, got, "lower-cased, with no state")
}

func TestDiscoveredSubscriptions(t *testing.T) {
	tests := []struct {
		name string
		subs [][2]*string
		want []Subscription
		err  string
		kind upstream.Kind
	}{
		{"every state but Deleted, once each", [][2]*string{
			sub(subA, "Enabled"), sub(subB, "Disabled"), sub(subC, "Deleted"), sub("0B1F6471-1BF0-4DDA-AEC3-000000000004", "Frozen"),
			sub("0b1f6471-1bf0-4dda-aec3-000000000004", "Frozen"), sub("0b1f6471-1bf0-4dda-aec3-000000000005", "PastDue"),
		}, []Subscription{
			{subA, "Enabled"}, {subB, "Disabled"}, {"0b1f6471-1bf0-4dda-aec3-000000000004", "Frozen"},
			{"0b1f6471-1bf0-4dda-aec3-000000000005", "PastDue"},
		}, "", ""},
		{"none visible", [][2]*string{sub(subC, "deleted")}, nil,
			"list subscriptions: no subscription is visible to the identity (Deleted ones are not listed)", upstream.KindAuth},
		{"no subscription id", [][2]*string{sub(subA, "Enabled"), {nil, to.Ptr("Enabled")}}, nil,
			"list subscriptions: malformed response: a subscription without a valid subscriptionId", upstream.KindInvalidResponse},
		{"an id that is no GUID", [][2]*string{sub("x", "Enabled")}, nil,
			"list subscriptions: malformed response: a subscription without a valid subscriptionId", upstream.KindInvalidResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, calls := subscriptionsClient(t, tt.subs)
			log, logs := debugLog()
			got, err := c.Subscriptions(context.Background(), nil, log)
			assert.Equal(t, 1, *calls)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				assert.Equal(t, tt.kind, upstream.KindOf(err))
				assert.Equal(t, OpSubscriptions, upstream.OperationOf(err))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
			assert.Contains(t, logs.String(), `"msg":"subscription skipped","subscription":"`+subC+`","state":"Deleted"`)
		})
	}
}

func TestInSubscription(t *testing.T) {
	tests := []struct {
		state armsubscriptions.SubscriptionState
		in    sources.Phase
		want  sources.Phase
	}{
		{"", sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStateEnabled, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStatePastDue, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStatePastDue, sources.PhasePending, sources.PhasePending},
		{armsubscriptions.SubscriptionStateWarned, sources.PhaseReady, sources.PhaseReady},
		{armsubscriptions.SubscriptionStateWarned, sources.PhasePending, sources.PhasePending},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseReady, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhasePending, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseDegraded, sources.PhaseDegraded},
		{armsubscriptions.SubscriptionStateDisabled, sources.PhaseLeaving, sources.PhaseLeaving},
		{"disabled", sources.PhaseReady, sources.PhaseDegraded},
		{"Frozen", sources.PhaseReady, sources.PhaseReady},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%s", tt.state, tt.in), func(t *testing.T) {
			assert.Equal(t, tt.want, InSubscription(tt.in, tt.state))
		})
	}
}

func TestMark(t *testing.T) {
	const key = "toy.argocd-cluster-discovery.io/subscription-state"
	tests := []struct {
		sub        Subscription
		phase      sources.Phase
		annotation string // "" for none
	}{
		{Subscription{ID: subA}, sources.PhaseReady, ""},
		{Subscription{ID: subA, State: "Enabled"}, sources.PhaseReady, ""},
		{Subscription{ID: subA, State: "enabled"}, sources.PhaseReady, ""},
		{Subscription{ID: subA, State: "Warned"}, sources.PhaseReady, "Warned"},
		{Subscription{ID: subA, State: "Disabled"}, sources.PhaseDegraded, "Disabled"},
		{Subscription{ID: subA, State: "Frozen"}, sources.PhaseReady, "Frozen"},
	}
	for _, tt := range tests {
		t.Run(string(tt.sub.State), func(t *testing.T) {
			c := sources.Cluster{Phase: sources.PhaseReady, Annotations: map[string]string{}}
			tt.sub.Mark(&c, key)
			assert.Equal(t, tt.phase, c.Phase)
			v, ok := c.Annotations[key]
			assert.Equal(t, tt.annotation != "", ok)
			assert.Equal(t, tt.annotation, v)
		})
	}
}

func TestEachSubscription(t *testing.T) {
	subs := []Subscription{{ID: subA, State: "Enabled"}, {ID: subB, State: "Disabled"}, {ID: subC}}
	t.Run("every subscription, in order", func(t *testing.T) {
		log, logs := debugLog()
		got, err := EachSubscription(context.Background(), log, subs, 2, func(_ context.Context, s Subscription) ([]string, error) {
			return []string{s.ID[:4], string(s.State)}, nil
		})
		require.NoError(t, err)
		assert.Equal(t, [][]string{{"9b4d", "Enabled"}, {"3e1f", "Disabled"}, {"0b1f", ""}}, got)
		assert.Contains(t, logs.String(), `"msg":"subscription listed in a state other than Enabled","subscription":"`+subB+`","state":"Disabled"`)
		assert.NotContains(t, logs.String(), subA)
		assert.NotContains(t, logs.String(), subC, "a configured subscription has no state to tell")
	})
	t.Run("the first failure cancels the others", func(t *testing.T) {
		failed := &upstream.Error{Kind: upstream.KindAuth, Msg: "HTTP 403 AuthorizationFailed"}
		log, _ := debugLog()
		got, err := EachSubscription(context.Background(), log, subs, 8, func(ctx context.Context, s Subscription) ([]string, error) {
			if s.ID == subB {
				return nil, failed
			}
			<-ctx.Done()
			return nil, ctx.Err()
		})
		require.EqualError(t, err, "subscription "+subB+": list clusters: HTTP 403 AuthorizationFailed")
		require.ErrorIs(t, err, failed)
		assert.Nil(t, got, "no partial result")
	})
}

func TestParallel(t *testing.T) {
	boom := errors.New("boom")
	done := make([]bool, 5)
	require.NoError(t, Parallel(context.Background(), 5, 2, func(_ context.Context, i int) error { done[i] = true; return nil }))
	assert.Equal(t, []bool{true, true, true, true, true}, done)
	err := Parallel(context.Background(), 3, 3, func(ctx context.Context, i int) error {
		if i == 1 {
			return boom
		}
		<-ctx.Done()
		return ctx.Err()
	})
	require.ErrorIs(t, err, boom)
}

func TestKept(t *testing.T) {
	type toy struct {
		name, state string
		skip        SkipReason
	}
	perSub := [][]toy{
		{{"a", "Succeeded", ""}, {"b", "Succeeded", SkipTags}},
		nil,
		{{"c", "Creating", ""}, {"d", "unknown", "private"}, {"e", "Succeeded", SkipTags}},
	}
	log, logs := debugLog()
	kept, n := Kept(log, perSub, func(m *toy) Listed {
		return Listed{Subscription: subA, ResourceGroup: "rg", Name: m.name, State: m.state, Skip: m.skip, Detail: "why " + m.name}
	})
	var names []string
	for _, k := range kept {
		names = append(names, k.name)
	}
	assert.Equal(t, []string{"a", "c"}, names)
	assert.Same(t, &perSub[0][0], kept[0], "the listed clusters, not copies")
	assert.Equal(t, Counts{
		States:  map[string]int{"Succeeded": 3, "Creating": 1, "unknown": 1},
		Skipped: map[string]int{"tags": 2, "private": 1},
	}, n)
	assert.Contains(t, logs.String(),
		`"msg":"cluster skipped","cluster":"d","resourceGroup":"rg","subscription":"`+subA+`","reason":"private","detail":"why d"`)
}

func TestClusterID(t *testing.T) {
	const typ = "Microsoft.Toy/clusters"
	good := "/subscriptions/" + subA + "/resourceGroups/RG-Apps/providers/Microsoft.Toy/clusters/alpha"
	tests := []struct {
		name string
		id   *string
		err  string
	}{
		{"as listed", to.Ptr(good), ""},
		{"case-insensitive", to.Ptr("/subscriptions/" + strings.ToUpper(subA) + "/resourcegroups/RG-Apps/providers/microsoft.toy/CLUSTERS/alpha"), ""},
		{"no id", nil, "cluster without id"},
		{"unparsable", to.Ptr("nope"), `cluster id "nope": invalid resource ID`},
		{"another type", to.Ptr("/subscriptions/" + subA + "/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm"),
			`cluster id "/subscriptions/` + subA + `/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm" is not a toy cluster`},
		{"no resource group", to.Ptr("/subscriptions/" + subA + "/providers/Microsoft.Toy/clusters/a"), "is not a toy cluster"},
		{"another subscription", to.Ptr("/subscriptions/" + subC + "/resourceGroups/rg/providers/Microsoft.Toy/clusters/a"), "is outside the subscription"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rid, err := ClusterID(subA, tt.id, typ, "a toy cluster")
			if tt.err != "" {
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, "RG-Apps", rid.ResourceGroupName)
			assert.Equal(t, "alpha", rid.Name)
		})
	}
}
