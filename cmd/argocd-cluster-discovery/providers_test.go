package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// toy is a provider written in a few lines: what a new provider gives the
// registry, and all the command needs to configure, validate, list and
// serve it.
type toy struct{}

func (toy) Name() sources.Provider            { return "toy" }
func (toy) Kind() sources.Kind                { return sources.KindCloud }
func (toy) NewConfig() sources.ProviderConfig { return &toyConfig{} }

type toyConfig struct {
	Region   string `json:"region"`
	Clusters int    `json:"clusters"`
}

func (c *toyConfig) Default() {
	if c.Clusters == 0 {
		c.Clusters = 2
	}
}
func (c *toyConfig) SetDirectory(string) {}
func (c *toyConfig) Validate(at *field.Path) field.ErrorList {
	if c.Region == "" {
		return field.ErrorList{field.Required(at.Child("region"), "")}
	}
	return nil
}
func (c *toyConfig) NewSource(o sources.SourceOptions) (sources.Source, error) {
	return toySource{name: o.Name, cfg: *c}, nil
}

type toySource struct {
	name string
	cfg  toyConfig
}

func (s toySource) Clusters(context.Context) ([]sources.Cluster, error) {
	out := make([]sources.Cluster, s.cfg.Clusters)
	for i := range out {
		n := fmt.Sprintf("toy-%s-%d", s.cfg.Region, i)
		out[i] = sources.Cluster{Provider: "toy", Name: n, Server: "https://" + n + ".example.com", Region: s.cfg.Region, Ready: true}
	}
	return out, nil
}

func toyRegistry() *sources.Registry { return sources.NewRegistry(static.Provider{}, toy{}) }

// TestToyProviderIsConfiguredValidatedListedAndServed registers a provider
// the binary does not ship and follows it from the configuration file to
// the plugin API's answer.
func TestToyProviderIsConfiguredValidatedListedAndServed(t *testing.T) {
	t.Setenv("ACD_TOY_TOKEN", "toy-plugin-token-x")
	head := "server: {listen: '127.0.0.1:0', tokens: [{env: ACD_TOY_TOKEN}]}\nlog: {level: error}\n"

	_, err := config.ParseWith([]byte(head+"sources: [{name: t, provider: toy, toy: {clusters: 1, colour: red}}]\n"), t.TempDir(), toyRegistry())
	require.Error(t, err)
	var paths []string
	for _, e := range config.Errors(err) {
		paths = append(paths, e.Field)
	}
	assert.ElementsMatch(t, []string{"sources[0].toy.region", "sources[0].toy.colour"}, paths, err.Error())

	cfg, err := config.ParseWith([]byte(head+"sources: [{name: t, provider: toy, interval: 1s, toy: {region: mars}}]\n"), t.TempDir(), toyRegistry())
	require.NoError(t, err)
	require.IsType(t, &toyConfig{}, cfg.Sources[0].Section)
	assert.Equal(t, 2, cfg.Sources[0].Section.(*toyConfig).Clusters, "the provider's Default ran")

	reg := prometheus.NewRegistry()
	logger := slog.New(slog.DiscardHandler)
	built, err := build(cfg, logger, reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, cfg, built, logger, reg, &serveHooks{listening: func(api, _ string) { addr <- api }})
	}()
	defer func() {
		cancel()
		require.NoError(t, <-done)
		http.DefaultClient.CloseIdleConnections()
	}()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not start")
	}
	waitReady(t, base, "toy-plugin-token-x")

	resp, body := post(t, base+"/api/v1/getparams.execute", "toy-plugin-token-x", `{"applicationSetName":"toys","input":{"parameters":{"provider":"toy"}}}`)
	require.Equal(t, 200, resp.StatusCode, string(body))
	var out struct {
		Output struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"output"`
	}
	require.NoError(t, json.Unmarshal(body, &out))
	require.Len(t, out.Output.Parameters, 2)
	for i, p := range out.Output.Parameters {
		assert.Equal(t, fmt.Sprintf("toy-mars-%d", i), p["name"])
		assert.Equal(t, "toy", p["provider"])
		assert.Equal(t, "t", p["source"])
	}
}
