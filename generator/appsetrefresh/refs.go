package appsetrefresh

// maxNesting bounds the walk through matrix and merge generators. Argo CD
// itself accepts two levels; the bound only guards against a pathological
// object.
const maxNesting = 8

// UsesPlugin reports whether an ApplicationSet, as the unstructured content
// the API returns, has a plugin generator whose configMapRef.name is
// configMap, at the top level of spec.generators or inside matrix and merge
// generators at any depth. It is pure: it reads obj and nothing else.
//
//	spec.generators[]                                    plugin.configMapRef.name
//	spec.generators[].matrix.generators[]                plugin.configMapRef.name
//	spec.generators[].merge.generators[]                 plugin.configMapRef.name
//	... .matrix.generators[].merge.generators[] ...      (nested ones are JSON
//	                                                     objects in the CRD: the
//	                                                     same shape once decoded)
func UsesPlugin(obj map[string]any, configMap string) bool {
	if configMap == "" {
		return false
	}
	spec, _ := obj["spec"].(map[string]any)
	return generatorsUse(spec["generators"], configMap, 0)
}

func generatorsUse(generators any, configMap string, depth int) bool {
	list, _ := generators.([]any)
	if depth > maxNesting {
		return false
	}
	for _, g := range list {
		gen, _ := g.(map[string]any)
		if plugin, ok := gen["plugin"].(map[string]any); ok {
			if ref, ok := plugin["configMapRef"].(map[string]any); ok {
				if name, _ := ref["name"].(string); name == configMap {
					return true
				}
			}
		}
		for _, combining := range []string{"matrix", "merge"} {
			if c, ok := gen[combining].(map[string]any); ok && generatorsUse(c["generators"], configMap, depth+1) {
				return true
			}
		}
	}
	return false
}
