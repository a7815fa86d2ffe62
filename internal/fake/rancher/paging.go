package rancher

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/url"
	"sort"
	"strconv"
)

// The paging of the fake's collections (/v3/clusters, /v3/tokens,
// /v3/cloudcredentials), as norman pages them (parse/collection.go,
// api/handler/query.go): sorted by id, limit items from the id marker on,
// an absolute next link that keeps the query, partial while more follow.

// defaultLimit and maxLimit are norman's: the page size without a limit,
// and the largest limit it takes.
const (
	defaultLimit = 1000
	maxLimit     = 10000
)

// page is the part of a collection a request asks for: ids[start:end], and
// the pagination object of the answer.
type page struct {
	start, end, limit int
	pagination        map[string]any
}

// number is the page's number, counting from 1 as a client following the
// next links counts it.
func (p page) number() int { return p.start/p.limit + 1 }

// pageOf pages the sorted ids for the query q: q's limit when positive, cut
// to most, else def; from the first id not before q's marker. The next link
// is link?<q> with the next page's marker, and the limit when q's is not
// the one used (none, or cut).
func pageOf(ids []string, q url.Values, def, most int, link string) page {
	limit := def
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l > 0 {
		limit = min(l, most)
	}
	start := 0
	if m := q.Get("marker"); m != "" {
		start = sort.SearchStrings(ids, m)
	}
	p := page{start: start, end: min(start+limit, len(ids)), limit: limit,
		pagination: map[string]any{"limit": limit, "total": len(ids)}}
	if p.end < len(ids) {
		next := maps.Clone(q)
		next.Set("marker", ids[p.end])
		if q.Get("limit") != strconv.Itoa(limit) {
			next.Set("limit", strconv.Itoa(limit))
		}
		p.pagination["next"], p.pagination["partial"] = link+"?"+next.Encode(), true
	}
	return p
}

// collectionJSON is a collection answer: norman's envelope around data,
// whose items are JSON already (a raw cluster object is written as it was
// put).
func collectionJSON(resourceType, self string, pagination map[string]any, data [][]byte) []byte {
	head, _ := json.Marshal(map[string]any{ // strings, numbers and booleans: no error
		"type": "collection", "resourceType": resourceType,
		"links": map[string]string{"self": self}, "pagination": pagination,
	})
	var b bytes.Buffer
	b.Write(head[:len(head)-1])
	b.WriteString(`,"data":[`)
	b.Write(bytes.Join(data, []byte(",")))
	b.WriteString("]}")
	return b.Bytes()
}
