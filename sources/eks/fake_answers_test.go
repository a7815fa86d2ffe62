package eks

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/stretchr/testify/require"
)

// The fake's answers to ListClusters, DescribeCluster and GetResources.

func (f *fakeAWS) list(w http.ResponseWriter, r *http.Request, req fakeReq) {
	q := r.URL.Query()
	max, err := strconv.Atoi(q.Get("maxResults"))
	if err != nil || max < 1 || max > 100 {
		http.Error(w, "maxResults", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.maxResult[q.Get("maxResults")] = true
	all := f.clusters[req.Account+"/"+req.Region]
	f.mu.Unlock()
	start := 0
	if tok := q.Get("nextToken"); tok != "" {
		if start, err = strconv.Atoi(strings.TrimPrefix(tok, "tok-")); err != nil {
			http.Error(w, "nextToken", http.StatusBadRequest)
			return
		}
	}
	end := min(start+min(max, f.PageSize), len(all))
	out := struct {
		Clusters  []string `json:"clusters"`
		NextToken *string  `json:"nextToken,omitempty"`
	}{Clusters: []string{}}
	for _, c := range all[start:end] {
		out.Clusters = append(out.Clusters, c.Name)
	}
	if end < len(all) {
		out.NextToken = aws.String(fmt.Sprintf("tok-%d", end))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

func (f *fakeAWS) describe(w http.ResponseWriter, req fakeReq) {
	f.mu.Lock()
	var found *fakeCluster
	for _, c := range f.clusters[req.Account+"/"+req.Region] {
		if c.Name == req.Name {
			found = &c
			break
		}
	}
	if found == nil {
		f.mu.Unlock()
		f.writeError(w, "eks", &fakeResp{Status: http.StatusNotFound, ErrType: "ResourceNotFoundException",
			Body: `{"message":"No cluster found for name: ` + req.Name + `."}`})
		return
	}
	id := describeKey{req.Account, req.Region, found.Name, found.Status, found.Private, found.Creating, fmt.Sprint(found.Tags)}
	body, ok := f.bodies[id]
	if !ok {
		body = f.describeBody(*found, req.Account, req.Region)
		f.bodies[id] = body
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

// getResources answers GetResources in its awsJson1_1 shape: the tagged
// clusters of the account and region (resource type filter eks:cluster
// required), paged by PaginationToken, which is "" on the last page.
func (f *fakeAWS) getResources(w http.ResponseWriter, r *http.Request, req fakeReq) {
	var in struct {
		PaginationToken     string
		ResourceTypeFilters []string
		ResourcesPerPage    int
	}
	invalid := func(msg string) {
		f.writeError(w, "tagging", &fakeResp{Status: http.StatusBadRequest, ErrType: "InvalidParameterException",
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
	var tagged []fakeCluster
	for _, c := range f.clusters[req.Account+"/"+req.Region] {
		if !c.NeverTagged {
			tagged = append(tagged, c)
		}
	}
	f.mu.Unlock()
	start := 0
	if in.PaginationToken != "" {
		var err error
		if start, err = strconv.Atoi(strings.TrimPrefix(in.PaginationToken, "tag-")); err != nil || start > len(tagged) {
			f.writeError(w, "tagging", &fakeResp{Status: http.StatusBadRequest, ErrType: "PaginationTokenExpiredException"})
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
		m := mapping{ResourceARN: clusterARN(c.Name, req.Account, req.Region), Tags: []tag{}}
		tags := f.tagsOf(c)
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

// clusterARN is the ARN of an EKS cluster, in the partition of its
// region.
func clusterARN(name, account, region string) string {
	part, _ := partitionOf(region)
	return fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", part, region, account, name)
}

// describeBody is the fixture answer turned into c of account in region.
func (f *fakeAWS) describeBody(c fakeCluster, account, region string) []byte {
	var doc map[string]map[string]any
	require.NoError(f.t, json.Unmarshal(f.describeTmpl, &doc))
	cl := doc["cluster"]
	cl["name"] = c.Name
	cl["arn"] = clusterARN(c.Name, account, region)
	cl["endpoint"] = fmt.Sprintf("https://%.24X.gr7.%s.eks.amazonaws.com", c.Name+"-"+account, region)
	cl["status"] = "ACTIVE"
	if c.Status != "" {
		cl["status"] = c.Status
	}
	cl["resourcesVpcConfig"].(map[string]any)["endpointPublicAccess"] = !c.Private
	cl["tags"] = f.tagsOf(c)
	if c.Creating {
		delete(cl, "endpoint")
		delete(cl, "certificateAuthority")
	}
	b, err := json.Marshal(doc)
	require.NoError(f.t, err)
	return b
}
