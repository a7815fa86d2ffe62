package rancher

import (
	"bytes"
	"encoding/json"
	"strings"
)

// What a unit test sets of Rancher's own settings: the cacerts setting,
// and the host Rancher writes its links on (its server-url, or a proxy's
// X-Forwarded-* headers).

// SetLinkBase makes every link the fake writes start with base instead of
// the fake's URL, as Rancher writes them behind a proxy when its
// server-url names another host: the X-Api-Schemas header and the API
// root's links, the schemas' links, the links and next links of
// /v3/clusters (the recorded pages' included), /v3/tokens and
// /v3/cloudcredentials. The cluster objects keep the links they hold. ""
// restores the fake's URL.
func (f *Fake) SetLinkBase(base string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.linkBase = strings.TrimSuffix(base, "/")
}

// links is the base of the links. Called with f.mu held.
func (f *Fake) links() string {
	if f.linkBase != "" {
		return f.linkBase
	}
	return f.srv.URL
}

// onLinkBase is b, a fixture whose links name the fake's URL, with the
// links on the link base. Called with f.mu held.
func (f *Fake) onLinkBase(b []byte) []byte {
	if f.linkBase == "" {
		return b
	}
	return bytes.ReplaceAll(b, []byte(f.srv.URL), []byte(f.linkBase))
}

// root is the API root, GET /v3. Called with f.mu held.
func (f *Fake) root() []byte {
	b, _ := json.Marshal(map[string]any{"type": "apiRoot", "links": map[string]string{ // strings: no error
		"self": f.links() + "/v3", "clusters": f.links() + "/v3/clusters",
	}})
	return b
}

// SetCACerts sets the value of the cacerts setting: the PEM of the private
// CA Rancher's certificate chains to, "" for a publicly trusted one (as
// Rancher shows it then), or anything a test makes of it. Until then it is
// the fixture's.
func (f *Fake) SetCACerts(pem string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var setting map[string]any
	if json.Unmarshal(f.cacerts, &setting) != nil || setting == nil {
		setting = map[string]any{"id": "cacerts", "type": "setting", "name": "cacerts"}
	}
	setting["value"] = pem
	f.cacerts, _ = json.Marshal(setting)
}

// CACerts is the value of the cacerts setting.
func (f *Fake) CACerts() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var setting struct {
		Value string `json:"value"`
	}
	_ = json.Unmarshal(f.cacerts, &setting)
	return setting.Value
}
