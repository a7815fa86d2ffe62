package appsetrefresh

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"
)

// Transform trims an ApplicationSet for the trigger's informer cache (a
// cache.TransformFunc): it keeps apiVersion, kind, name, namespace, uid,
// resourceVersion and the refresh annotation, and of the spec only whether
// a generator uses the plugin ConfigMap configMap, as one plugin generator,
// so that UsesPlugin reads the trimmed copy as it reads the full one.
// Templates, generators' parameters, the status (which lists every
// generated Application), other annotations, labels and managedFields are
// dropped. It is idempotent.
func Transform(configMap string) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		meta := map[string]any{"name": u.GetName(), "namespace": u.GetNamespace(), "uid": string(u.GetUID()),
			"resourceVersion": u.GetResourceVersion()}
		if v, ok := u.GetAnnotations()[AnnotationRefresh]; ok {
			meta["annotations"] = map[string]any{AnnotationRefresh: v}
		}
		spec := map[string]any{}
		if UsesPlugin(u.Object, configMap) {
			spec["generators"] = []any{map[string]any{"plugin": map[string]any{"configMapRef": map[string]any{"name": configMap}}}}
		}
		u.Object = map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta, "spec": spec}
		return u, nil
	}
}
