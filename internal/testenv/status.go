package testenv

import (
	"encoding/json"
	"net/http"
)

// SourcesSynced reports whether the service at base ("http://host:port")
// shows every source listed on /status: what a harness waits for before it
// expects 200 answers, now that /readyz only says the process can answer.
// token is the plugin API's bearer token, which /status needs on the API's
// listener ("" on server.opsListen's).
func SourcesSynced(client *http.Client, base, token string) bool {
	req, err := http.NewRequest(http.MethodGet, base+"/status", nil)
	if err != nil {
		return false
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var st struct {
		Sources []struct {
			Synced bool `json:"synced"`
		} `json:"sources"`
	}
	if json.NewDecoder(resp.Body).Decode(&st) != nil || len(st.Sources) == 0 {
		return false
	}
	for _, s := range st.Sources {
		if !s.Synced {
			return false
		}
	}
	return true
}
