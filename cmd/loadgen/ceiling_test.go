package main

import (
	"encoding/json"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// TestCeilingObjects: the ideal client's writes are the service's: a
// cluster Secret with the CA in its config, a ClusterProfile with a record
// of ~2 KB, and the apply of its full status.
func TestCeilingObjects(t *testing.T) {
	cs := fleet(3)
	caData, err := newCAs(len(cs), true)
	require.NoError(t, err)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

	s, err := ceilingSecret(&cs[1], caData[1])
	require.NoError(t, err)
	assert.Equal(t, argoNS, s.Namespace)
	assert.Equal(t, "cluster", s.Labels["argocd.argoproj.io/secret-type"])
	var config struct {
		TLS struct {
			CAData string `json:"caData"`
		} `json:"tlsClientConfig"`
	}
	require.NoError(t, json.Unmarshal(s.Data["config"], &config))
	assert.Equal(t, caData[1], config.TLS.CAData)
	assert.Greater(t, len(caData[1]), 1000, "a realistic CA")
	assert.Equal(t, cs[1].name, string(s.Data["name"]))
	assert.Equal(t, cs[1].server, string(s.Data["server"]))

	name, body, status, err := ceilingProfile(&cs[1], caData[1], now)
	require.NoError(t, err)
	var p unstructured.Unstructured
	require.NoError(t, p.UnmarshalJSON(body))
	assert.Equal(t, name, p.GetName())
	assert.Equal(t, clusterprofile.Manager, p.GetLabels()[clusterprofile.LabelManager])
	rec := p.GetAnnotations()[clusterprofile.AnnotationRecord]
	t.Logf("record %d bytes, ClusterProfile %d bytes, status %d bytes, Secret config %d bytes", len(rec), len(body), len(status), len(s.Data["config"]))
	assert.InDelta(t, 2048, len(rec), 1024, "a record of ~2 KB: %s", rec)
	displayName, _, _ := unstructured.NestedString(p.Object, "spec", "displayName")
	manager, _, _ := unstructured.NestedString(p.Object, "spec", "clusterManager", "name")
	assert.Equal(t, cs[1].name, displayName)
	assert.Equal(t, clusterprofile.Manager, manager)
	other, _, _, err := ceilingProfile(&cs[2], caData[2], now)
	require.NoError(t, err)
	assert.NotEqual(t, name, other, "one name per cluster")

	// the status the service applies: its conditions, properties and the
	// access provider with the CA, not a lighter one
	var st unstructured.Unstructured
	require.NoError(t, st.UnmarshalJSON(status))
	assert.Equal(t, name, st.GetName())
	conds, _, _ := unstructured.NestedSlice(st.Object, "status", "conditions")
	props, _, _ := unstructured.NestedSlice(st.Object, "status", "properties")
	version, _, _ := unstructured.NestedString(st.Object, "status", "version", "kubernetes")
	providers, _, _ := unstructured.NestedSlice(st.Object, "status", "accessProviders")
	assert.Len(t, conds, 5)
	assert.GreaterOrEqual(t, len(props), 8)
	assert.Equal(t, "v1.31.4", version)
	require.Len(t, providers, 1)
	ca, _, _ := unstructured.NestedString(providers[0].(map[string]any), "cluster", "certificate-authority-data")
	assert.Equal(t, caData[1], ca)
}

func TestCeilingOption(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		assets string
		ok     bool
	}{
		{name: "with -secrets", args: []string{"-secrets", "-ceiling", "-duration", "0"}, assets: "/testbin", ok: true},
		{name: "without -secrets", args: []string{"-ceiling"}, ok: false},
		{name: "off by default", args: []string{"-secrets", "-duration", "0"}, assets: "/testbin", ok: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBEBUILDER_ASSETS", tc.assets)
			o, ok := parseOptions(tc.args, io.Discard)
			assert.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, slices.Contains(tc.args, "-ceiling"), o.ceiling)
			}
		})
	}
}
