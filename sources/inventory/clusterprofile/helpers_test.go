package clusterprofile

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func unstructuredString(obj map[string]any, path ...string) (string, bool, error) {
	return unstructured.NestedString(obj, path...)
}

func unstructuredSlice(obj map[string]any, path ...string) ([]any, bool, error) {
	return unstructured.NestedSlice(obj, path...)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// conditionStatuses reads the status of each condition of obj, by type.
func conditionStatuses(t *testing.T, obj *unstructured.Unstructured) map[string]string {
	t.Helper()
	list, _, err := unstructured.NestedSlice(obj.Object, "status", "conditions")
	require.NoError(t, err)
	out := map[string]string{}
	for _, item := range list {
		c, ok := item.(map[string]any)
		require.True(t, ok)
		typ, _ := c["type"].(string)
		out[typ], _ = c["status"].(string)
	}
	return out
}
