package aws

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The fake's answers to AssumeRole, ListClusters, DescribeCluster and
// GetResources.

// FixtureSecret is the secret access key of the AssumeRole fixture: the
// secret of every assumed key, which no log or error may show.
const FixtureSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"

// assumeRole answers the fixture's AssumeRoleResponse with the role's
// account and the credentials AssumedKey and SessionToken, and makes that
// key the account's.
func (f *Server) assumeRole(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	roleARN := r.Form.Get("RoleArn")
	parts := strings.Split(roleARN, ":")
	if r.Form.Get("Action") != "AssumeRole" || len(parts) < 6 {
		http.Error(w, "bad AssumeRole", http.StatusBadRequest)
		return
	}
	account := parts[4]
	f.mu.Lock()
	f.keys[AssumedKey(account)] = account
	f.assumed = append(f.assumed, map[string]string{"RoleArn": roleARN, "RoleSessionName": r.Form.Get("RoleSessionName"), "ExternalId": r.Form.Get("ExternalId")})
	f.mu.Unlock()
	token := SessionToken(account)
	if f.AssumedToken != "" {
		token = f.AssumedToken
	}
	xml := strings.ReplaceAll(f.assumeXML, "ASIAQEXAMPLEFAKE7Q2M", AssumedKey(account))
	xml = strings.ReplaceAll(xml, "IQoJb3JpZ2luX2VjEXAMPLEFAKESESSIONTOKEN", token)
	if f.AssumedSecret != "" {
		xml = strings.ReplaceAll(xml, FixtureSecret, f.AssumedSecret)
	}
	xml = strings.ReplaceAll(xml, "123456789012", account)
	w.Header().Set("Content-Type", "text/xml")
	_, _ = w.Write([]byte(xml))
}

// list answers ListClusters: the names of the account's region, paged by
// nextToken.
func (f *Server) list(w http.ResponseWriter, r *http.Request, req Request) {
	q := r.URL.Query()
	maxResults, err := strconv.Atoi(q.Get("maxResults"))
	if err != nil || maxResults < 1 || maxResults > 100 {
		http.Error(w, "maxResults", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.maxResult[q.Get("maxResults")] = true
	all := slices.Clone(f.clusters[req.Account+"/"+req.Region])
	f.mu.Unlock()
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		if start, err = strconv.Atoi(strings.TrimPrefix(tok, "tok-")); err != nil || start > len(all) {
			http.Error(w, "nextToken", http.StatusBadRequest)
			return
		}
	}
	end := min(start+min(maxResults, f.PageSize), len(all))
	out := struct {
		Clusters  []string `json:"clusters"`
		NextToken *string  `json:"nextToken,omitempty"`
	}{Clusters: []string{}}
	for _, c := range all[start:end] {
		out.Clusters = append(out.Clusters, c.Name)
	}
	if end < len(all) {
		next := fmt.Sprintf("tok-%d", end)
		out.NextToken = &next
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// describe answers DescribeCluster: the fixture turned into the cluster,
// or EKS's ResourceNotFoundException.
func (f *Server) describe(w http.ResponseWriter, req Request) {
	k := req.Account + "/" + req.Region
	f.mu.Lock()
	i := slices.IndexFunc(f.clusters[k], func(c Cluster) bool { return c.Name == req.Name })
	var found Cluster
	ok := i >= 0
	if ok {
		found = f.clusters[k][i]
	} else if f.DescribeRemoved {
		found, ok = f.described[k+"/"+req.Name]
	}
	if !ok {
		f.mu.Unlock()
		f.writeError(w, "eks", &Response{Status: http.StatusNotFound, ErrType: "ResourceNotFoundException",
			Body: `{"message":"No cluster found for name: ` + req.Name + `."}`})
		return
	}
	id := fmt.Sprintf("%s/%#v", k, found)
	body, cached := f.bodies[id]
	f.mu.Unlock()
	if !cached {
		var err error
		if body, err = f.describeBody(found, req.Account, req.Region); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		f.mu.Lock()
		f.bodies[id] = body
		f.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// describeBody is the fixture answer turned into c of account in region.
func (f *Server) describeBody(c Cluster, account, region string) ([]byte, error) {
	var doc map[string]map[string]any
	if err := json.Unmarshal(f.describeTmpl, &doc); err != nil {
		return nil, fmt.Errorf("the describe fixture: %w", err)
	}
	cl := doc["cluster"]
	cl["name"] = c.Name
	cl["arn"] = ClusterARN(c.Name, account, region)
	cl["endpoint"] = fmt.Sprintf("https://%.24X.gr7.%s.eks.amazonaws.com", c.Name+"-"+account, region)
	if c.Endpoint != "" {
		cl["endpoint"] = c.Endpoint
	}
	if c.CAData != "" {
		cl["certificateAuthority"] = map[string]any{"data": c.CAData}
	}
	cl["status"] = "ACTIVE"
	if c.Status != "" {
		cl["status"] = c.Status
	}
	vpc, _ := cl["resourcesVpcConfig"].(map[string]any)
	if vpc == nil {
		return nil, fmt.Errorf("the describe fixture has no resourcesVpcConfig")
	}
	vpc["endpointPublicAccess"] = !c.Private
	cl["tags"] = f.TagsOf(c)
	if c.NeverTagged {
		delete(cl, "tags")
	}
	if c.Creating {
		delete(cl, "endpoint")
		delete(cl, "certificateAuthority")
	}
	return json.Marshal(doc)
}

// getResources answers GetResources in its awsJson1_1 shape: the tagged
// clusters of the account and region (resource type filter eks:cluster
// required), paged by PaginationToken, which is "" on the last page.
func (f *Server) getResources(w http.ResponseWriter, r *http.Request, req Request) {
	var in struct {
		PaginationToken     string
		ResourceTypeFilters []string
		ResourcesPerPage    int
	}
	invalid := func(msg string) {
		f.writeError(w, "tagging", &Response{Status: http.StatusBadRequest, ErrType: "InvalidParameterException",
			Body: `{"__type":"InvalidParameterException","Message":"` + msg + `"}`})
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		invalid("body is not JSON")
		return
	}
	if len(in.ResourceTypeFilters) != 1 || in.ResourceTypeFilters[0] != "eks:cluster" {
		invalid(fmt.Sprintf("the fake serves only ResourceTypeFilters [eks:cluster], not %q", in.ResourceTypeFilters))
		return
	}
	if in.ResourcesPerPage < 1 || in.ResourcesPerPage > 100 {
		invalid("ResourcesPerPage must be 1-100")
		return
	}
	f.mu.Lock()
	f.perPage[in.ResourcesPerPage] = true
	var tagged []Cluster
	for _, c := range f.clusters[req.Account+"/"+req.Region] {
		if !c.NeverTagged && !c.TaggingLags {
			tagged = append(tagged, c)
		}
	}
	f.mu.Unlock()
	start := 0
	if in.PaginationToken != "" {
		var err error
		if start, err = strconv.Atoi(strings.TrimPrefix(in.PaginationToken, "tag-")); err != nil || start > len(tagged) {
			f.writeError(w, "tagging", &Response{Status: http.StatusBadRequest, ErrType: "PaginationTokenExpiredException"})
			return
		}
	}
	end := min(start+min(in.ResourcesPerPage, f.TagPageSize), len(tagged))
	type tag struct{ Key, Value string }
	type mapping struct {
		ResourceARN string
		Tags        []tag
	}
	out := struct {
		PaginationToken        string
		ResourceTagMappingList []mapping
	}{ResourceTagMappingList: []mapping{}}
	for _, c := range tagged[start:end] {
		m := mapping{ResourceARN: ClusterARN(c.Name, req.Account, req.Region), Tags: []tag{}}
		tags := f.TagsOf(c)
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			m.Tags = append(m.Tags, tag{k, tags[k]})
		}
		out.ResourceTagMappingList = append(out.ResourceTagMappingList, m)
	}
	if end < len(tagged) {
		out.PaginationToken = fmt.Sprintf("tag-%d", end)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}
