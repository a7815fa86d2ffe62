package rancher

import "encoding/json"

// withTokenSchema adds the token schema to the schema collection, so that
// norman's clientbase can create, list and delete tokens.
func withTokenSchema(schemas []byte, base string) ([]byte, error) {
	var col map[string]any
	if err := json.Unmarshal(schemas, &col); err != nil {
		return nil, err
	}
	data, _ := col["data"].([]any)
	field := func(typ string, create bool) map[string]any {
		return map[string]any{"type": typ, "create": create, "update": false}
	}
	str := func(create bool) map[string]any { return field("string", create) }
	data = append(data, map[string]any{
		"type": "schema", "id": "token", "pluralName": "tokens",
		"links":             map[string]string{"self": base + "/v3/schemas/token", "collection": base + "/v3/tokens"},
		"collectionMethods": []string{"GET", "POST"}, "resourceMethods": []string{"GET", "DELETE"},
		"collectionFilters": map[string]any{}, "collectionActions": map[string]any{}, "resourceActions": map[string]any{},
		"collectionFields": map[string]any{}, "actions": map[string]any{},
		"resourceFields": map[string]any{
			"name": str(false), "token": str(false), "userId": str(false), "expiresAt": str(false),
			"clusterId": field("reference[cluster]", true), "description": str(true),
			"ttl": field("int", true), "expired": field("boolean", false),
		},
		"version": map[string]string{"group": "management.cattle.io", "path": "/v3", "version": "v3"},
	})
	col["data"] = data
	if p, ok := col["pagination"].(map[string]any); ok {
		p["total"] = len(data)
	}
	return json.Marshal(col)
}
