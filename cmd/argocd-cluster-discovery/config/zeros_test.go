package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/eks"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

func TestWrittenZeros(t *testing.T) {
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"no zero", `{"a":1,"b":"5m","c":true,"d":"x"}`, ""},
		{"numbers and durations", `{"a":0,"b":"0s","c":1,"d":"0","e":0.0}`, `{"a":0,"b":"0s","d":"0","e":0.0}`},
		{"nested", `{"retry":{"maxAttempts":0,"maxBackoff":"20s"},"x":{"y":2}}`, `{"retry":{"maxAttempts":0}}`},
		{"arrays keep their elements", `{"accounts":[{"id":"1"},{"id":"2","concurrency":0}],"regions":["a"]}`, `{"accounts":[{},{"concurrency":0}]}`},
		{"false and empty are not zeros here", `{"a":false,"b":"","c":null}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := writtenZeros([]byte(tc.raw))
			if tc.want == "" {
				assert.False(t, ok, string(got))
				return
			}
			require.True(t, ok)
			assert.JSONEq(t, tc.want, string(got))
		})
	}
}

// TestWrittenZerosAreNotDefaults: a zero written in a provider's section
// is the value checked, not replaced by the default (unset and 0 differ);
// unset still takes the default.
func TestWrittenZerosAreNotDefaults(t *testing.T) {
	head := "server: {tokens: [{env: T}]}\nsources:\n  - {name: one, provider: eks, eks: {regions: [eu-west-1], accounts: [{id: '111111111111'}]"
	_, err := Parse([]byte(head+", concurrency: 0, maxAttempts: 0, describeTTL: 0s}}\n"), t.TempDir())
	require.Error(t, err)
	assert.Equal(t, []string{
		"sources[0].eks.concurrency: Invalid value: 0: must be between 1 and 100",
		`sources[0].eks.describeTTL: Invalid value: "0s": must be at least 1ns`,
		"sources[0].eks.maxAttempts: Invalid value: 0: must be between 1 and 20",
	}, strings.Split(err.Error(), "\n"))

	cfg, err := Parse([]byte(head+"}}\n"), t.TempDir())
	require.NoError(t, err)
	c, ok := cfg.Sources[0].Section.(*eks.Config)
	require.True(t, ok)
	assert.Equal(t, 8, c.Concurrency)
	assert.Equal(t, 5, c.MaxAttempts)
	assert.Equal(t, "1h0m0s", c.DescribeTTL.String())
}

// TestWrittenZerosReachTheInventory: departure.gracePeriod: 0s,
// departure.maxDeletionsPercent: 0 and inventory.jitter: 0 are passed on
// as "none", never as "unset" (which the inventory fills with its
// defaults).
func TestWrittenZerosReachTheInventory(t *testing.T) {
	cfg, err := Parse([]byte("server: {tokens: [{env: T}]}\nsources: [{name: a, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"+
		"departure: {gracePeriod: 0s, maxDeletionsPercent: 0}\ninventory: {jitter: 0}\n"), t.TempDir())
	require.NoError(t, err)
	d := cfg.Departure.Inventory()
	assert.Negative(t, d.GracePeriod, "none")
	assert.Negative(t, d.MaxDeletionsPercent, "none")
	assert.Zero(t, cfg.Inventory.Jitter)

	cfg, err = Parse([]byte("server: {tokens: [{env: T}]}\nsources: [{name: a, provider: static, static: {clusters: [{name: a, server: 'https://a.example.com'}]}}]\n"), t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, inventory.DefaultDeparture(), cfg.Departure.Inventory(), "unset: the inventory's defaults, written once")
	assert.InDelta(t, inventory.DefaultJitter, cfg.Inventory.Jitter, 0)
}
