package sources_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

type reg struct {
	name sources.Provider
	kind sources.Kind
}

func (r reg) Name() sources.Provider            { return r.name }
func (r reg) Kind() sources.Kind                { return r.kind }
func (r reg) NewConfig() sources.ProviderConfig { return section{} }

type section struct{}

func (section) Default()                                                {}
func (section) SetDirectory(string)                                     {}
func (section) Validate(*field.Path) field.ErrorList                    { return nil }
func (section) NewSource(sources.SourceOptions) (sources.Source, error) { return src{}, nil }

type src struct{}

func (src) Clusters(context.Context) ([]sources.Cluster, error) { return nil, nil }

func TestRegistry(t *testing.T) {
	r := sources.NewRegistry(reg{"static", sources.KindFile}, reg{"toy", sources.KindCloud}, reg{"eks", sources.KindCloud})
	assert.Equal(t, []sources.Provider{"eks", "static", "toy"}, r.Names(), "sorted")
	got, ok := r.Lookup("toy")
	assert.True(t, ok)
	assert.Equal(t, sources.KindCloud, got.Kind())
	assert.True(t, r.Has("static"))
	assert.False(t, r.Has("gke"))
	assert.False(t, r.Has("Static"), "names are case-sensitive")
	_, ok = r.Lookup("")
	assert.False(t, ok)

	assert.PanicsWithValue(t, `sources: provider "toy" registered twice`, func() {
		sources.NewRegistry(reg{"toy", sources.KindCloud}, reg{"toy", sources.KindFile})
	})
	assert.Panics(t, func() { sources.NewRegistry(reg{"", sources.KindCloud}) })
}
