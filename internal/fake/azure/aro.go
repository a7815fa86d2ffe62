package azure

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Azure Red Hat OpenShift (Microsoft.RedHatOpenShift/openShiftClusters),
// as the resource provider answers through ARM: the clusters of a
// subscription paged at AROPageSize with an opaque $skipToken, and the
// credential actions refused and recorded (a discovery service must never
// call them). Answers are the fixtures of testdata/fixtures/aro with a
// test's names and states (ServeARO).

// AROAPIVersion is the api-version armredhatopenshift v1.6.0 sends; the
// fake refuses any other, as ARM does for a version the provider does not
// serve.
const AROAPIVersion = "2023-11-22"

// AROPageSize is the resource provider's page size: it reads at most 10
// documents per page (ARO-RP pkg/frontend/openshiftcluster_list.go).
const AROPageSize = 10

// aroType is the resource type as the resource provider's ids spell it.
const aroType = "Microsoft.RedHatOpenShift/OpenShiftClusters"

// OpenShiftCluster is an ARO cluster as ARM lists it: the fixture's first
// cluster moved to Sub, RG and Name, in this state.
type OpenShiftCluster struct {
	Sub, RG, Name string
	// Provisioning is properties.provisioningState, verbatim.
	Provisioning string
	// Tags replace the fixture's tags (nil: the fixture's).
	Tags map[string]string
	// Domain is clusterProfile.domain: a custom domain (ocp.example.com),
	// or empty for a managed one, <8 characters>.<location>.aroapp.io
	// derived from the id.
	Domain string
	// Location is the region (empty: westeurope); Version the OpenShift
	// version (empty: the fixture's).
	Location, Version string
	// Private makes the API server's (and the default ingress's)
	// visibility Private.
	Private bool
	// NoURL drops apiserverProfile.url and consoleProfile.url, as for a
	// cluster whose installation has not got that far.
	NoURL bool
}

// ID is the cluster's ARM resource id, spelled as the resource provider
// spells it.
func (c OpenShiftCluster) ID() string {
	return "/subscriptions/" + c.Sub + "/resourceGroups/" + c.RG + "/providers/" + aroType + "/" + c.Name
}

// ClusterDomain is clusterProfile.domain.
func (c OpenShiftCluster) ClusterDomain() string {
	if c.Domain != "" {
		return c.Domain
	}
	sum := sha256.Sum256([]byte(strings.ToLower(c.ID())))
	return hex.EncodeToString(sum[:])[:8] + "." + c.location() + ".aroapp.io"
}

// APIURL is apiserverProfile.url: port 6443 and a trailing slash.
func (c OpenShiftCluster) APIURL() string { return "https://api." + c.ClusterDomain() + ":6443/" }

// Server is the API server URL as the aro source renders it.
func (c OpenShiftCluster) Server() string { return strings.TrimSuffix(c.APIURL(), "/") }

func (c OpenShiftCluster) location() string {
	if c.Location != "" {
		return c.Location
	}
	return "westeurope"
}

// aroState is the ARO part of the fake, guarded by ARM.mu.
type aroState struct {
	loaded          bool
	page1, page2    []byte
	cluster         map[string]any
	fixtureToken    string
	clusters        map[string][]OpenShiftCluster // by lower-case subscription
	pageSize        int
	lists           map[string]string
	faults          []aroFault
	credentialCalls []string
	fixtureSubs     map[string]bool
	listsServed     int
}

// aroFault is an error answer for the cluster lists of sub ("" any).
type aroFault struct {
	sub       string
	status    int
	code, msg string
	remaining int // < 0: every request
}

// ServeARO loads the ARO fixtures of dir (testdata/fixtures/aro) and
// serves Microsoft.RedHatOpenShift/openShiftClusters; before it, those
// paths answer 404. It resets the ARO model: call it before the other ARO
// methods.
func (a *ARM) ServeARO(dir string) error {
	var st aroState
	for _, f := range []struct {
		name string
		into *[]byte
	}{{"openshift-clusters-list.json", &st.page1}, {"openshift-clusters-list-page2.json", &st.page2}} {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			return fmt.Errorf("fake arm: aro: %w", err)
		}
		*f.into = b
	}
	var page struct {
		Value    []map[string]any `json:"value"`
		NextLink string           `json:"nextLink"`
	}
	if err := json.Unmarshal(st.page1, &page); err != nil || len(page.Value) == 0 || page.NextLink == "" {
		return fmt.Errorf("fake arm: aro: the cluster list fixture has no cluster or no nextLink: %v", err) //nolint:errorlint // err may be nil
	}
	next, err := url.Parse(page.NextLink)
	if err != nil || next.Query().Get("$skipToken") == "" {
		return fmt.Errorf("fake arm: aro: the fixture's nextLink has no $skipToken")
	}
	st.cluster, st.fixtureToken = page.Value[0], next.Query().Get("$skipToken")
	var subs struct {
		Value []struct {
			SubscriptionID string `json:"subscriptionId"`
		} `json:"value"`
	}
	if err := json.Unmarshal(a.subsFixture, &subs); err != nil {
		return fmt.Errorf("fake arm: aro: the subscription list fixture: %w", err)
	}
	st.fixtureSubs = map[string]bool{}
	for _, s := range subs.Value {
		st.fixtureSubs[strings.ToLower(s.SubscriptionID)] = true
	}
	st.clusters, st.lists, st.pageSize, st.loaded = map[string][]OpenShiftCluster{}, map[string]string{}, AROPageSize, true
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aro = st
	return nil
}

// SetOpenShiftClusters replaces the ARO clusters of cs's subscriptions that
// have their names (compared as ARM does, case-insensitively) and appends
// the others. A subscription with ARO clusters set lists them, and no
// longer the fixture's.
func (a *ARM) SetOpenShiftClusters(cs ...OpenShiftCluster) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aro.clusters == nil {
		a.aro.clusters = map[string][]OpenShiftCluster{}
	}
	for _, c := range cs {
		sub := strings.ToLower(c.Sub)
		list := slices.DeleteFunc(a.aro.clusters[sub], func(o OpenShiftCluster) bool { return strings.EqualFold(o.Name, c.Name) })
		a.aro.clusters[sub] = append(list, c)
	}
}

// RemoveOpenShiftClusters takes ARO clusters out of a subscription.
func (a *ARM) RemoveOpenShiftClusters(sub string, names ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sub = strings.ToLower(sub)
	a.aro.clusters[sub] = slices.DeleteFunc(a.aro.clusters[sub], func(c OpenShiftCluster) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, c.Name) })
	})
}

// SetAROPageSize pages the model's ARO lists at n (AROPageSize by default;
// 0: one page).
func (a *ARM) SetAROPageSize(n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aro.pageSize = n
}

// SetAROList answers the ARO cluster lists of sub with body (empty: no
// override); {{URL}} becomes the fake's URL.
func (a *ARM) SetAROList(sub, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.aro.lists == nil {
		a.aro.lists = map[string]string{}
	}
	a.aro.lists[strings.ToLower(sub)] = body
}

// FailARO answers the next times ARO cluster list requests of sub (""
// every subscription; times < 0: every request) with status and ARM's
// error shape (code, message). A 429 carries Retry-After: 0, as ARM's
// throttling does with a delay.
func (a *ARM) FailARO(sub string, status int, code, message string, times int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.aro.faults = append(a.aro.faults, aroFault{sub: strings.ToLower(sub), status: status, code: code, msg: message, remaining: times})
}

// AROCredentialCalls returns the listCredentials and listAdminCredentials
// requests received ("POST path"). The fake refuses them (403), and a
// discovery service must never send one: a test fails when this is not
// empty.
func (a *ARM) AROCredentialCalls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.aro.credentialCalls)
}

// AROLists counts the ARO list pages answered with 200.
func (a *ARM) AROLists() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.aro.listsServed
}

// isARO reports whether the request is for Microsoft.RedHatOpenShift.
func isARO(parts []string) bool {
	return len(parts) >= 5 && parts[0] == "subscriptions" &&
		slices.ContainsFunc(parts, func(p string) bool { return strings.EqualFold(p, "Microsoft.RedHatOpenShift") })
}

// serveARO answers a request for Microsoft.RedHatOpenShift: the cluster
// list of a subscription or resource group, the credential actions
// (refused and recorded), or 404. The caller holds a.mu.
func (a *ARM) serveARO(w http.ResponseWriter, r *http.Request, parts []string) {
	n := len(parts)
	last := strings.ToLower(parts[n-1])
	if r.Method == http.MethodPost && (last == "listcredentials" || last == "listadmincredentials") {
		a.aro.credentialCalls = append(a.aro.credentialCalls, r.Method+" "+r.URL.Path)
		armError(w, http.StatusForbidden, "AuthorizationFailed", "The fake ARM refuses "+parts[n-1]+
			": argocd-cluster-discovery must never call the ARO credential actions (admin material).")
		return
	}
	if !a.aro.loaded {
		armError(w, http.StatusNotFound, "NotFound", "the fake serves no ARO: call ServeARO")
		return
	}
	sub := strings.ToLower(parts[1])
	rg := ""
	switch {
	case r.Method != http.MethodGet || !strings.EqualFold(parts[n-1], "openShiftClusters") || !strings.EqualFold(parts[n-2], "Microsoft.RedHatOpenShift"):
		armError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
		return
	case n == 7 && strings.EqualFold(parts[2], "resourceGroups"):
		rg = parts[3]
	case n != 5:
		armError(w, http.StatusNotFound, "NotFound", "no route "+r.Method+" "+r.URL.Path)
		return
	}
	if v := r.URL.Query().Get("api-version"); v != AROAPIVersion {
		armError(w, http.StatusBadRequest, "NoRegisteredProviderFound", "No registered resource provider found for location 'westeurope' and API version '"+
			v+"' for type 'openShiftClusters'. The supported api-versions are '"+AROAPIVersion+"'.")
		return
	}
	if a.aroFault(w, sub) {
		return
	}
	if body, ok := a.aro.lists[sub]; ok && body != "" {
		a.aro.listsServed++
		write(w, http.StatusOK, []byte(strings.ReplaceAll(body, "{{URL}}", a.srv.URL)))
		return
	}
	_, modelled := a.aro.clusters[sub]
	_, listed := a.subs[sub]
	switch {
	case modelled || (listed && sub != FixtureSubscription) || (a.aro.fixtureSubs[sub] && sub != FixtureSubscription):
		a.serveAROModel(w, r, sub, rg)
	case sub == FixtureSubscription:
		a.serveAROFixture(w, r)
	default:
		armError(w, http.StatusNotFound, "SubscriptionNotFound", "The subscription '"+sub+"' could not be found.")
	}
}

// aroFault writes the first fault that applies to sub, if any. The
// caller holds a.mu.
func (a *ARM) aroFault(w http.ResponseWriter, sub string) bool {
	for i := range a.aro.faults {
		f := &a.aro.faults[i]
		if f.remaining == 0 || (f.sub != "" && f.sub != sub) {
			continue
		}
		if f.remaining > 0 {
			f.remaining--
		}
		if f.status == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "0")
		}
		armError(w, f.status, f.code, f.msg)
		return true
	}
	return false
}

// serveAROFixture answers the fixture's two pages. The caller holds a.mu.
func (a *ARM) serveAROFixture(w http.ResponseWriter, r *http.Request) {
	switch tok := r.URL.Query().Get("$skipToken"); tok {
	case "":
		a.aro.listsServed++
		write(w, http.StatusOK, []byte(strings.ReplaceAll(string(a.aro.page1), fixtureHost, a.srv.URL)))
	case a.aro.fixtureToken:
		a.aro.listsServed++
		write(w, http.StatusOK, a.aro.page2)
	default:
		armError(w, http.StatusBadRequest, "InvalidSkipToken", "The skip token is not valid.")
	}
}

// aroSkipToken is the opaque $skipToken of the page of sub that starts at
// offset; aroOffset reads it back.
func aroSkipToken(sub string, offset int) string {
	return base64.RawURLEncoding.EncodeToString([]byte("aro|" + sub + "|" + strconv.Itoa(offset)))
}

func aroOffset(sub, tok string) (int, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, false
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 || parts[0] != "aro" || parts[1] != sub {
		return 0, false
	}
	n, err := strconv.Atoi(parts[2])
	return n, err == nil && n >= 0
}

// serveAROModel answers a page of the model's clusters of sub (of
// resource group rg when set). The caller holds a.mu.
func (a *ARM) serveAROModel(w http.ResponseWriter, r *http.Request, sub, rg string) {
	var all []OpenShiftCluster
	for _, c := range a.aro.clusters[sub] {
		if (rg == "" || strings.EqualFold(c.RG, rg)) && !a.isHidden(sub, c.RG) {
			all = append(all, c)
		}
	}
	start := 0
	if tok := r.URL.Query().Get("$skipToken"); tok != "" {
		var ok bool
		if start, ok = aroOffset(sub, tok); !ok || start > len(all) {
			armError(w, http.StatusBadRequest, "InvalidSkipToken", "The skip token is not valid.")
			return
		}
	}
	end := len(all)
	if a.aro.pageSize > 0 {
		end = min(start+a.aro.pageSize, len(all))
	}
	list := []map[string]any{}
	for _, c := range all[start:end] {
		list = append(list, a.modelOpenShiftCluster(c))
	}
	page := map[string]any{"value": list}
	if end < len(all) {
		q := r.URL.Query()
		q.Set("$skipToken", aroSkipToken(sub, end))
		page["nextLink"] = a.srv.URL + r.URL.Path + "?" + q.Encode()
	}
	a.aro.listsServed++
	writeJSON(w, http.StatusOK, page)
}

// modelOpenShiftCluster is c as ARM lists it. The caller holds a.mu.
func (a *ARM) modelOpenShiftCluster(c OpenShiftCluster) map[string]any {
	var oc map[string]any
	b, _ := json.Marshal(a.aro.cluster)
	_ = json.Unmarshal(b, &oc) // a deep copy of the fixture's cluster
	domain := c.ClusterDomain()
	oc["id"], oc["name"], oc["location"] = c.ID(), c.Name, c.location()
	if c.Tags != nil {
		oc["tags"] = c.Tags
	}
	props := oc["properties"].(map[string]any)
	props["provisioningState"] = c.Provisioning
	cp := props["clusterProfile"].(map[string]any)
	cp["domain"] = domain
	if c.Version != "" {
		cp["version"] = c.Version
	}
	cp["resourceGroupId"] = "/subscriptions/" + c.Sub + "/resourceGroups/aro-" + strings.SplitN(domain, ".", 2)[0]
	visibility, apiIP, ingressIP := "Public", "20.61.118.42", "20.61.118.57"
	if c.Private {
		visibility, apiIP, ingressIP = "Private", "10.0.0.4", "10.0.2.254"
	}
	props["apiserverProfile"] = map[string]any{"visibility": visibility, "url": c.APIURL(), "ip": apiIP}
	props["consoleProfile"] = map[string]any{"url": "https://console-openshift-console.apps." + domain + "/"}
	props["ingressProfiles"] = []map[string]any{{"name": "default", "visibility": visibility, "ip": ingressIP}}
	if c.NoURL {
		props["apiserverProfile"] = map[string]any{"visibility": visibility}
		props["consoleProfile"] = map[string]any{}
	}
	return oc
}
