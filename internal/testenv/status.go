package testenv

import (
	"encoding/json"
	"net/http"
)

// SourcesSynced reports whether the service at base (its operations
// address, "http://host:port") shows every source listed on /status: what
// a harness waits for before it expects 200 answers, now that /readyz only
// says the process can answer.
func SourcesSynced(client *http.Client, base string) bool {
	resp, err := client.Get(base + "/status")
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
