package azurearm

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	azfake "github.com/Azure/azure-sdk-for-go/sdk/azcore/fake"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

func toyCounter(t *testing.T) policy.Policy {
	t.Helper()
	m, err := upstream.NewMetrics("toy", nil)
	require.NoError(t, err)
	return NewCountingPolicy(m, toyOps())
}

func TestClientOptions(t *testing.T) {
	publicRM := cloud.AzurePublic.Services[cloud.ResourceManager].Endpoint

	o := ClientOptions(Identity{Cloud: "AzureChina", ARMEndpoint: "https://arm.example.com"}, nil, toyCounter(t))
	assert.True(t, o.DisableRPRegistration, "a discovery service never registers resource providers")
	assert.Len(t, o.PerRetryPolicies, 1)
	assert.Equal(t, cloud.AzureChina.ActiveDirectoryAuthorityHost, o.Cloud.ActiveDirectoryAuthorityHost)
	assert.Equal(t, "https://arm.example.com", o.Cloud.Services[cloud.ResourceManager].Endpoint)
	assert.Equal(t, cloud.AzureChina.Services[cloud.ResourceManager].Audience, o.Cloud.Services[cloud.ResourceManager].Audience)
	assert.NotEqual(t, "https://arm.example.com", cloud.AzureChina.Services[cloud.ResourceManager].Endpoint, "the SDK's cloud is not modified")

	base := &arm.ClientOptions{}
	base.Transport = http.DefaultClient
	o = ClientOptions(Identity{Cloud: "AzurePublic"}, base, toyCounter(t))
	assert.Equal(t, publicRM, o.Cloud.Services[cloud.ResourceManager].Endpoint)
	assert.Empty(t, base.PerRetryPolicies, "the caller's options are not modified")
	assert.False(t, base.DisableRPRegistration)
	assert.Equal(t, http.DefaultClient, o.Transport)

	test := &arm.ClientOptions{}
	test.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: "https://login.test/"}
	o = ClientOptions(Identity{Cloud: "AzureGovernment", ARMEndpoint: "https://arm.test"}, test, toyCounter(t))
	assert.Equal(t, "https://login.test/", o.Cloud.ActiveDirectoryAuthorityHost, "a cloud the base names wins over the key")
	assert.Equal(t, "https://arm.test", o.Cloud.Services[cloud.ResourceManager].Endpoint)
	assert.Nil(t, test.Cloud.Services, "the base's cloud is not modified")
}

func TestNewClient(t *testing.T) {
	t.Setenv("AZURE_FEDERATED_TOKEN_FILE", "/nonexistent/token")
	t.Setenv("AZURE_CLIENT_ID", "00000000-0000-0000-0000-000000000001")
	t.Setenv("AZURE_TENANT_ID", "00000000-0000-0000-0000-000000000002")
	tests := []struct {
		name     string
		discover bool
		hooks    Hooks
	}{
		{"the default chain, discovering", true, Hooks{}},
		{"the default chain, configured subscriptions", false, Hooks{}},
		{"a test credential", true, Hooks{Credential: &azfake.TokenCredential{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewClient(Identity{ClientID: "00000000-0000-0000-0000-000000000003", Cloud: "AzurePublic"}, tt.discover, tt.hooks, toyCounter(t))
			require.NoError(t, err, "building the credential makes no call")
			assert.IsType(t, classifiedCredential{}, c.Cred)
			assert.Equal(t, tt.discover, c.Subs != nil, "the subscriptions are listed only when none is configured")
			assert.True(t, c.Opts.DisableRPRegistration)
		})
	}
}

func TestClassifiedCredential(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want upstream.Kind
	}{
		{"refused", errors.New("AADSTS700016: application not found"), upstream.KindAuth},
		{"cancelled", context.Canceled, upstream.KindCanceled},
		{"Entra ID unreachable", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, upstream.KindNetwork},
		{"Entra ID answers 502", &azcore.ResponseError{StatusCode: http.StatusBadGateway}, upstream.KindAuth},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &azfake.TokenCredential{}
			fake.SetError(tt.err)
			_, err := classifiedCredential{fake}.GetToken(context.Background(), policy.TokenRequestOptions{})
			assert.Equal(t, tt.want, upstream.KindOf(err))
			assert.ErrorIs(t, err, tt.err)
		})
	}
	tk, err := classifiedCredential{&azfake.TokenCredential{}}.GetToken(context.Background(), policy.TokenRequestOptions{})
	require.NoError(t, err)
	assert.NotEmpty(t, tk.Token)
}

// thing is a per-subscription client of the tests.
type thing struct{ sub string }

func TestClients(t *testing.T) {
	c, err := NewClient(Identity{Cloud: "AzurePublic"}, false, Hooks{Credential: &azfake.TokenCredential{}}, toyCounter(t))
	require.NoError(t, err)
	made := 0
	cs := NewClients(c, func(sub string, cred azcore.TokenCredential, o *arm.ClientOptions) (*thing, error) {
		assert.Equal(t, c.Cred, cred)
		assert.Equal(t, c.Opts, o)
		made++
		if sub == "bad" {
			return nil, errors.New("invalid subscription")
		}
		return &thing{sub: sub}, nil
	})
	a, err := cs.Get("a")
	require.NoError(t, err)
	again, err := cs.Get("a")
	require.NoError(t, err)
	assert.Same(t, a, again, "made once")
	_, err = cs.Get("b")
	require.NoError(t, err)
	_, err = cs.Get("bad")
	require.EqualError(t, err, "invalid subscription")
	assert.Equal(t, 3, made)
	assert.Equal(t, []string{"a", "b"}, cs.Subscriptions())

	cs.Forget([]Subscription{{ID: "b"}})
	assert.Equal(t, []string{"b"}, cs.Subscriptions(), "a's subscription is no longer listed")

	err = List(context.Background(), "things.list", cs, "bad",
		func(*thing) *runtime.Pager[page] { t.Fatal("no pager without a client"); return nil },
		page.items, func(*string) error { return nil })
	assert.Equal(t, upstream.KindConfig, upstream.KindOf(err))
	assert.Equal(t, "things.list", upstream.OperationOf(err))
}

// page is one page of a list of the tests.
type page struct {
	Value    []*string
	NextLink *string
}

func (p page) items() ([]*string, *string) { return p.Value, p.NextLink }

// pager pages through pages, then fails with err when it is set.
func pager(pages []page, err error) *runtime.Pager[page] {
	i := 0
	return runtime.NewPager(runtime.PagingHandler[page]{
		More: func(p page) bool { return i < len(pages) || err != nil && i == len(pages) },
		Fetcher: func(context.Context, *page) (page, error) {
			if i == len(pages) {
				i++
				return page{}, err
			}
			i++
			return pages[i-1], nil
		},
	})
}

func TestWalk(t *testing.T) {
	p := func(next string, items ...string) page {
		out := page{}
		for _, s := range items {
			out.Value = append(out.Value, to.Ptr(s))
		}
		if next != "" {
			out.NextLink = to.Ptr(next)
		}
		return out
	}
	stop := errors.New("stop")
	tests := []struct {
		name  string
		pages []page
		err   error
		each  func(string) error
		want  []string
		fails string
		kind  upstream.Kind
	}{
		{"every page", []page{p("n1", "a", "b"), p("n2", "c"), p("", "d")}, nil, nil, []string{"a", "b", "c", "d"}, "", ""},
		{"a nextLink that repeats", []page{p("n1", "a"), p("n1", "b")}, nil, nil, []string{"a"}, "malformed response: nextLink repeats", upstream.KindInvalidResponse},
		{"a page that fails", []page{p("n1", "a")}, &azcore.ResponseError{StatusCode: http.StatusForbidden, ErrorCode: "AuthorizationFailed"}, nil,
			[]string{"a"}, "HTTP 403 AuthorizationFailed", upstream.KindAuth},
		{"each fails", []page{p("", "a", "b")}, nil, func(s string) error {
			if s == "b" {
				return stop
			}
			return nil
		}, []string{"a", "b"}, "stop", upstream.KindOther},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			err := Walk(context.Background(), "things.list", pager(tt.pages, tt.err), page.items, func(s *string) error {
				got = append(got, *s)
				if tt.each != nil {
					return tt.each(*s)
				}
				return nil
			})
			assert.Equal(t, tt.want, got)
			if tt.fails == "" {
				require.NoError(t, err)
				return
			}
			require.EqualError(t, err, tt.fails)
			assert.Equal(t, tt.kind, upstream.KindOf(err))
		})
	}
}
