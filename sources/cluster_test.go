package sources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestClusterValidate(t *testing.T) {
	valid := func() sources.Cluster {
		return sources.Cluster{Source: "demo", Provider: sources.ProviderStatic, Name: "prod", Server: "https://prod.example.com", Ready: true}
	}
	tests := []struct {
		name    string
		mutate  func(c *sources.Cluster)
		wantErr string
	}{
		{name: "minimal", mutate: func(*sources.Cluster) {}},
		{name: "bearer token", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: &sources.SecretRef{Env: "T"}}
		}},
		{name: "aws", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: "prod"}}
		}},
		{name: "not ready is still valid", mutate: func(c *sources.Cluster) { c.Ready, c.NotReadyReason = false, "CA not fetched yet" }},
		{name: "server with trailing slash", mutate: func(c *sources.Cluster) { c.Server = "https://prod.example.com/" }},

		{name: "no name", mutate: func(c *sources.Cluster) { c.Name = "" }, wantErr: "cluster has no name"},
		{name: "no server", mutate: func(c *sources.Cluster) { c.Server = "" }, wantErr: "cluster prod: server url"},
		{name: "bad scheme", mutate: func(c *sources.Cluster) { c.Server = "ftp://prod.example.com" }, wantErr: "cluster prod: server url scheme must be https or http"},
		{name: "server with query", mutate: func(c *sources.Cluster) { c.Server = "https://prod.example.com?a=b" }, wantErr: "cluster prod: server url"},
		{name: "bad auth", mutate: func(c *sources.Cluster) { c.Auth = sources.Auth{Kind: sources.AuthExec} }, wantErr: "cluster prod: auth: exec auth needs a command"},
		{name: "auth kind mismatch", mutate: func(c *sources.Cluster) {
			c.Auth = sources.Auth{Kind: sources.AuthAWS, Exec: &sources.ExecProvider{Command: "x"}}
		}, wantErr: "cluster prod: auth: aws auth needs a cluster name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Validate()
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.wantErr)
		})
	}
}

func TestSortByName(t *testing.T) {
	type key struct{ name, source string }
	tests := []struct {
		name string
		in   []key
		want []key
	}{
		{name: "nil", in: nil, want: nil},
		{name: "one", in: []key{{"a", "s"}}, want: []key{{"a", "s"}}},
		{name: "by name", in: []key{{"c", "s"}, {"a", "s"}, {"b", "s"}}, want: []key{{"a", "s"}, {"b", "s"}, {"c", "s"}}},
		{name: "already sorted", in: []key{{"a", "s"}, {"b", "s"}}, want: []key{{"a", "s"}, {"b", "s"}}},
		{name: "reversed", in: []key{{"d", ""}, {"c", ""}, {"b", ""}, {"a", ""}}, want: []key{{"a", ""}, {"b", ""}, {"c", ""}, {"d", ""}}},
		{name: "ties broken by source", in: []key{{"x", "rancher"}, {"x", "aws"}, {"a", "zzz"}, {"x", "azure"}}, want: []key{{"a", "zzz"}, {"x", "aws"}, {"x", "azure"}, {"x", "rancher"}}},
		{name: "name before source", in: []key{{"b", "a"}, {"a", "b"}}, want: []key{{"a", "b"}, {"b", "a"}}},
		{name: "byte order, upper case first", in: []key{{"b", ""}, {"B", ""}, {"a", ""}, {"A", ""}}, want: []key{{"A", ""}, {"B", ""}, {"a", ""}, {"b", ""}}},
		{name: "prefix sorts first", in: []key{{"prod-eu", ""}, {"prod", ""}}, want: []key{{"prod", ""}, {"prod-eu", ""}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cs []sources.Cluster
			for _, k := range tt.in {
				cs = append(cs, sources.Cluster{Name: k.name, Source: k.source, Server: "https://" + k.name + "." + k.source})
			}
			sources.SortByName(cs)
			var got []key
			for _, c := range cs {
				got = append(got, key{c.Name, c.Source})
				assert.Equal(t, "https://"+c.Name+"."+c.Source, c.Server, "whole clusters must move, not just keys")
			}
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseNamespaces(t *testing.T) {
	for in, want := range map[string][]string{"a,b": {"a", "b"}, " a  b,a ": {"a", "b"}, "team-x": {"team-x"}} { //nolint:gocritic // white space on purpose
		got, err := sources.ParseNamespaces(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", " , ", "Upper", "a,b_c", "-a"} {
		_, err := sources.ParseNamespaces(bad)
		assert.Error(t, err, "%q must not widen access to every namespace", bad)
	}
}
