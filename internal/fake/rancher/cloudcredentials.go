package rancher

import (
	"encoding/json"
	"net/http"
	"sort"
)

// Rancher's cloud credentials, GET /v3/cloudcredentials, as Rancher lists
// them to a user who may read them: in its v3 shape (the secret fields,
// Azure's clientSecret, Amazon's secretKey, never shown), paged as norman
// pages.

// CloudCredential is a cloud credential a test puts in the fake
// (PutCloudCredentials).
type CloudCredential struct {
	// ID is namespace:name, e.g. cattle-global-data:cc-q7t2w: what a
	// hosted cluster's aksConfig.azureCredentialSecret or
	// eksConfig.amazonCredentialSecret names.
	ID, Name string
	// Driver is the provisioning driver: "azure" shows an
	// azurecredentialConfig with SubscriptionID, "amazonec2" an
	// amazonec2credentialConfig; another driver no config.
	Driver         string
	SubscriptionID string
}

// PutCloudCredentials adds or replaces cloud credentials (by ID).
func (f *Fake) PutCloudCredentials(creds ...CloudCredential) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range creds {
		f.creds[c.ID] = c
	}
}

// serveCloudCredentials answers GET /v3/cloudcredentials. Called with f.mu
// held.
func (f *Fake) serveCloudCredentials(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		writeAPIError(w, http.StatusMethodNotAllowed, "MethodNotAllowed", "Method "+r.Method+" not supported")
		return
	}
	ids := make([]string, 0, len(f.creds))
	for id := range f.creds {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	self := f.links() + "/v3/cloudcredentials"
	p := pageOf(ids, r.URL.Query(), defaultLimit, maxLimit, self)
	data := make([][]byte, 0, p.end-p.start)
	for _, id := range ids[p.start:p.end] {
		b, _ := json.Marshal(f.renderCredential(f.creds[id])) // strings and maps of them: no error
		data = append(data, b)
	}
	writeRancher(w, http.StatusOK, collectionJSON("cloudCredential", self, p.pagination, data))
}

// renderCredential is c as /v3/cloudcredentials shows it, created by the
// fake's user. Called with f.mu held.
func (f *Fake) renderCredential(c CloudCredential) map[string]any {
	self := f.links() + "/v3/cloudCredentials/" + c.ID
	obj := map[string]any{
		"type": "cloudCredential", "baseType": "cloudCredential", "id": c.ID, "name": c.Name, "description": "",
		"uuid": "e2e-" + c.ID, "created": "2025-11-03T09:12:44Z", "createdTS": 1762161164000, "creatorId": fakeUserID,
		"annotations": map[string]string{"field.cattle.io/creatorId": fakeUserID, "provisioning.cattle.io/driver": c.Driver},
		"labels":      map[string]string{"cattle.io/creator": "norman"},
		"links":       map[string]string{"self": self, "update": self, "remove": self},
	}
	switch c.Driver {
	case "azure":
		obj["azurecredentialConfig"] = map[string]any{
			"clientId": "5f3a1c2e-7d4b-4e8a-9c6f-1b2d3e4f5a6b", "environment": "AzurePublicCloud",
			"subscriptionId": c.SubscriptionID, "tenantId": "72f988bf-86f1-41af-91ab-2d7cd011db47",
			"type": "/v3/schemas/azureCredentialConfig",
		}
	case "amazonec2":
		obj["amazonec2credentialConfig"] = map[string]any{"accessKey": "AKIAIOSFODNN7EXAMPLE", "defaultRegion": "us-east-1",
			"type": "/v3/schemas/amazonec2CredentialConfig"}
	}
	return obj
}
