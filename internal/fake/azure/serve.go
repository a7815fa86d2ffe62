package azure

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const armJSON = "application/json; charset=utf-8"

// fixtureHost is the Resource Manager URL the fixtures' links name.
const fixtureHost = "https://management.azure.com"

func write(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", armJSON)
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	write(w, status, b)
}

// armError writes ARM's error shape.
func armError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func (a *ARM) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.requests = append(a.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	a.authz = append(a.authz, r.Header.Get("Authorization"))
	if r.URL.Path == "/msi/token" && a.miHeader != "" {
		a.serveManagedIdentity(w, r)
		return
	}
	if a.token != "" && r.Header.Get("Authorization") != "Bearer "+a.token {
		a.badAuth = append(a.badAuth, r.Method+" "+r.URL.Path)
		armError(w, http.StatusUnauthorized, "InvalidAuthenticationToken", "The access token is invalid.")
		return
	}
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	sub := ""
	if len(parts) > 1 && parts[0] == "subscriptions" {
		sub = strings.ToLower(parts[1])
	}
	if isARO(parts) {
		a.serveARO(w, r, parts)
		return
	}
	isList := r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/providers/Microsoft.ContainerService/managedClusters")
	switch {
	case isList && a.throttle > 0:
		a.throttle--
		w.Header().Set("Retry-After", "0")
		armError(w, http.StatusTooManyRequests, "TooManyRequests", "Rate limit exceeded.")
	case r.Method == http.MethodGet && r.URL.Path == "/subscriptions":
		a.subLists++
		a.serveSubscriptions(w)
	case r.Method == http.MethodPost && a.readOnly[sub]:
		armError(w, http.StatusConflict, "ReadOnlyDisabledSubscription", "The subscription '"+sub+
			"' is disabled and therefore marked as read only. You cannot perform any write actions on this subscription until it is re-enabled.")
	case isList:
		a.serveList(w, r, sub)
	case r.Method == http.MethodGet && len(parts) == 3 && strings.EqualFold(parts[2], "resourcegroups"):
		a.serveGroups(w, sub)
	case r.Method == http.MethodPost && len(parts) == 9 && parts[8] == "listClusterUserCredential":
		a.serveCredentials(w, sub, parts[7])
	default:
		armError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
	}
}

// serveManagedIdentity answers App Service's managed identity token
// request. The caller holds a.mu.
func (a *ARM) serveManagedIdentity(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("X-Identity-Header") != a.miHeader || r.URL.Query().Get("resource") == "" {
		a.badAuth = append(a.badAuth, r.Method+" "+r.URL.String())
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_request"})
		return
	}
	a.tokenReqs++
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token": a.token, "token_type": "Bearer", "resource": r.URL.Query().Get("resource"),
		"expires_on": strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10), "client_id": r.URL.Query().Get("client_id"),
	})
}

// serveSubscriptions answers GET /subscriptions: the override, the model,
// or the fixture. The caller holds a.mu.
func (a *ARM) serveSubscriptions(w http.ResponseWriter) {
	switch {
	case a.subsBody != "":
		write(w, http.StatusOK, []byte(a.subsBody))
	case a.subsSet:
		list := []map[string]any{}
		for i, id := range a.subOrder {
			list = append(list, a.modelSubscription(i, id, a.subs[strings.ToLower(id)]))
		}
		writeJSON(w, http.StatusOK, map[string]any{"value": list})
	default:
		write(w, http.StatusOK, a.subsFixture)
	}
}

// modelled reports whether sub's clusters come from the model. The
// caller holds a.mu.
func (a *ARM) modelled(sub string) bool {
	_, listed := a.subs[sub]
	_, clusters := a.clusters[sub]
	return listed || clusters
}

// serveList answers a subscription's managed cluster list: an override,
// the model (paged by $skiptoken when a page size is set), the fixture's
// two pages for FixtureSubscription, or 404 SubscriptionNotFound. The
// caller holds a.mu.
func (a *ARM) serveList(w http.ResponseWriter, r *http.Request, sub string) {
	body, ok := a.lists[sub]
	status := http.StatusOK
	if a.listBody != "" {
		body, ok, status = a.listBody, true, a.listStatus
	}
	switch {
	case ok:
		write(w, status, []byte(strings.ReplaceAll(body, "{{URL}}", a.srv.URL)))
	case a.modelled(sub):
		a.serveModelList(w, r, sub)
	case sub != FixtureSubscription:
		armError(w, http.StatusNotFound, "SubscriptionNotFound", "The subscription '"+sub+"' could not be found.")
	case r.URL.Query().Get("$skiptoken") != "":
		write(w, http.StatusOK, a.list2Fixture)
	default:
		write(w, http.StatusOK, []byte(strings.ReplaceAll(string(a.listFixture), fixtureHost, a.srv.URL)))
	}
}

// serveModelList answers a page of the model's clusters of sub. The
// caller holds a.mu.
func (a *ARM) serveModelList(w http.ResponseWriter, r *http.Request, sub string) {
	all := a.clusters[sub]
	start := 0
	if tok := r.URL.Query().Get("$skiptoken"); tok != "" {
		var err error
		if start, err = strconv.Atoi(tok); err != nil || start > len(all) {
			armError(w, http.StatusBadRequest, "InvalidSkipToken", "The skip token is not valid.")
			return
		}
	}
	end := len(all)
	if a.pageSize > 0 {
		end = min(start+a.pageSize, len(all))
	}
	list := []map[string]any{}
	for _, c := range all[start:end] {
		if !a.isHidden(sub, c.RG) {
			list = append(list, a.modelCluster(c))
		}
	}
	page := map[string]any{"value": list}
	if end < len(all) {
		q := r.URL.Query()
		q.Set("$skiptoken", strconv.Itoa(end))
		page["nextLink"] = a.srv.URL + r.URL.Path + "?" + q.Encode()
	}
	writeJSON(w, http.StatusOK, page)
}

// kubeconfigCA and kubeconfigServer are the lines of the fixture's
// kubeconfig that a credential CA rewrites.
var (
	kubeconfigCA     = regexp.MustCompile(`(?m)^(\s*certificate-authority-data: ).*$`)
	kubeconfigServer = regexp.MustCompile(`(?m)^(\s*server: ).*$`)
)

// serveCredentials answers listClusterUserCredential of cluster name in
// sub: the override, or the fixture's, its kubeconfig naming the
// cluster's server and the credential CA when one is set. The caller
// holds a.mu.
func (a *ARM) serveCredentials(w http.ResponseWriter, sub, name string) {
	if a.credStatus != 0 {
		write(w, a.credStatus, []byte(a.credBody))
		return
	}
	if a.modelled(sub) && !a.hasCluster(sub, name) {
		armError(w, http.StatusNotFound, "ResourceNotFound", "The Resource 'Microsoft.ContainerService/managedClusters/"+name+"' was not found.")
		return
	}
	if a.credCA == nil {
		write(w, http.StatusOK, a.credFixture)
		return
	}
	var creds struct {
		Kubeconfigs []struct {
			Name  string `json:"name"`
			Value []byte `json:"value"`
		} `json:"kubeconfigs"`
	}
	if err := json.Unmarshal(a.credFixture, &creds); err != nil || len(creds.Kubeconfigs) == 0 {
		armError(w, http.StatusInternalServerError, "InternalServerError", fmt.Sprintf("the credentials fixture: %v", err))
		return
	}
	kc := string(creds.Kubeconfigs[0].Value)
	kc = kubeconfigCA.ReplaceAllString(kc, "${1}"+base64.StdEncoding.EncodeToString(a.credCA))
	kc = kubeconfigServer.ReplaceAllString(kc, "${1}"+ManagedCluster{Name: name}.Server())
	creds.Kubeconfigs[0].Value = []byte(kc)
	writeJSON(w, http.StatusOK, creds)
}

// hasCluster reports whether the model has cluster name in sub (names
// compared as ARM does, case-insensitively). The caller holds a.mu.
func (a *ARM) hasCluster(sub, name string) bool {
	for _, c := range a.clusters[sub] {
		if strings.EqualFold(c.Name, name) {
			return true
		}
	}
	return false
}
