package azure

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// groupsState is the resource group list's model: ARM lists the groups
// the identity can read, and lists a subscription's clusters only from
// those.
type groupsState struct {
	// hidden are the groups the identity can no longer read, by
	// lower-case subscription then lower-case group
	hidden map[string]map[string]bool
	// status and body, when status is set, answer every group list
	status int
	body   string
	lists  int
}

// HideResourceGroups takes the identity's role on resource groups rgs of
// sub away: GET .../resourcegroups no longer lists them, and neither
// cluster list (AKS, ARO) lists their modelled clusters. ShowResourceGroups
// gives it back.
func (a *ARM) HideResourceGroups(sub string, rgs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sub = strings.ToLower(sub)
	if a.groups.hidden == nil {
		a.groups.hidden = map[string]map[string]bool{}
	}
	if a.groups.hidden[sub] == nil {
		a.groups.hidden[sub] = map[string]bool{}
	}
	for _, rg := range rgs {
		a.groups.hidden[sub][strings.ToLower(rg)] = true
	}
}

// ShowResourceGroups undoes HideResourceGroups.
func (a *ARM) ShowResourceGroups(sub string, rgs ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rg := range rgs {
		delete(a.groups.hidden[strings.ToLower(sub)], strings.ToLower(rg))
	}
}

// SetResourceGroupsAnswer answers every resource group list with status
// and body (ARM's error shape for an error); status 0 goes back to the
// model.
func (a *ARM) SetResourceGroupsAnswer(status int, body string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.groups.status, a.groups.body = status, body
}

// ResourceGroupLists counts the resource group lists answered.
func (a *ARM) ResourceGroupLists() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.groups.lists
}

// isHidden reports whether the identity can no longer read group rg of
// sub. The caller holds a.mu.
func (a *ARM) isHidden(sub, rg string) bool {
	return a.groups.hidden[strings.ToLower(sub)][strings.ToLower(rg)]
}

// serveGroups answers GET /subscriptions/{sub}/resourcegroups: the groups
// of every cluster the fake can list in sub (its models, fixtures and
// overrides), less the hidden ones, in ARM's shape. The caller holds
// a.mu.
func (a *ARM) serveGroups(w http.ResponseWriter, sub string) {
	a.groups.lists++
	if a.groups.status != 0 {
		write(w, a.groups.status, []byte(a.groups.body))
		return
	}
	names := map[string]string{} // lower-case: as spelled
	add := func(id string) {
		parts := strings.Split(strings.Trim(id, "/"), "/")
		if len(parts) >= 4 && strings.EqualFold(parts[0], "subscriptions") && strings.EqualFold(parts[1], sub) &&
			strings.EqualFold(parts[2], "resourceGroups") && !a.isHidden(sub, parts[3]) {
			names[strings.ToLower(parts[3])] = parts[3]
		}
	}
	for _, c := range a.clusters[sub] {
		add(c.ID())
	}
	for _, c := range a.aro.clusters[sub] {
		add(c.ID())
	}
	bodies := [][]byte{[]byte(a.lists[sub]), []byte(a.listBody), []byte(a.aro.lists[sub])}
	if !a.modelled(sub) { // its AKS list is the fixture's
		bodies = append(bodies, a.listFixture, a.list2Fixture)
	}
	if _, modelled := a.aro.clusters[sub]; !modelled {
		bodies = append(bodies, a.aro.page1, a.aro.page2)
	}
	for _, body := range bodies {
		for _, id := range idsIn(body) {
			add(id)
		}
	}
	list := []map[string]any{}
	for _, key := range slices.Sorted(maps.Keys(names)) {
		rg := names[key]
		list = append(list, map[string]any{
			"id": "/subscriptions/" + sub + "/resourceGroups/" + rg, "name": rg, "type": "Microsoft.Resources/resourceGroups",
			"location": "westeurope", "properties": map[string]any{"provisioningState": "Succeeded"},
		})
	}
	writeJSON(w, http.StatusOK, map[string]any{"value": list})
}

// idsIn returns the ids of a list body's items; none when it is not one.
func idsIn(body []byte) []string {
	var page struct {
		Value []struct {
			ID string `json:"id"`
		} `json:"value"`
	}
	if json.Unmarshal(body, &page) != nil {
		return nil
	}
	ids := make([]string, 0, len(page.Value))
	for _, v := range page.Value {
		ids = append(ids, v.ID)
	}
	return ids
}
