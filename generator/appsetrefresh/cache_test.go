package appsetrefresh

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestTransform(t *testing.T) {
	full := func(generators []any, annotations map[string]any) *unstructured.Unstructured {
		u := appSet("argocd", "a", generators, annotations)
		u.SetUID("u1")
		u.SetResourceVersion("42")
		u.SetLabels(map[string]string{"team": "a"})
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl"}})
		_ = unstructured.SetNestedField(u.Object, map[string]any{"metadata": map[string]any{"name": "{{.name}}"}}, "spec", "template")
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "app-1"}}, "status", "resources")
		return u
	}
	for _, tc := range []struct {
		name    string
		in      *unstructured.Unstructured
		uses    bool
		pending bool
	}{
		{name: "plugin, nested", in: full([]any{map[string]any{"matrix": map[string]any{"generators": []any{pluginGen(plugin)}}}}, nil), uses: true},
		{name: "plugin, refresh pending", in: full([]any{pluginGen(plugin)}, map[string]any{AnnotationRefresh: "true", "other": "x"}), uses: true, pending: true},
		{name: "another plugin", in: full([]any{pluginGen("other")}, nil)},
		{name: "no generator", in: full(nil, nil)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Transform(plugin)(tc.in.DeepCopy())
			require.NoError(t, err)
			u := out.(*unstructured.Unstructured)
			assert.Equal(t, tc.uses, UsesPlugin(u.Object, plugin), "UsesPlugin reads the trimmed copy as the full one")
			assert.Equal(t, "a", u.GetName())
			assert.Equal(t, "argocd", u.GetNamespace())
			assert.Equal(t, "42", u.GetResourceVersion())
			assert.EqualValues(t, "u1", u.GetUID())
			_, pending := u.GetAnnotations()[AnnotationRefresh]
			assert.Equal(t, tc.pending, pending)
			assert.NotContains(t, u.GetAnnotations(), "other")
			assert.Empty(t, u.GetLabels())
			assert.Empty(t, u.GetManagedFields())
			assert.NotContains(t, u.Object, "status")
			assert.NotContains(t, u.Object["spec"], "template")
			again, err := Transform(plugin)(u.DeepCopy())
			require.NoError(t, err)
			assert.Equal(t, u, again, "idempotent")
		})
	}
}
