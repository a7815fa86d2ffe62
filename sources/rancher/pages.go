package rancher

import (
	"fmt"

	"github.com/rancher/norman/types"
)

// page is a page of a /v3 collection: its pagination, and the data the
// collection type adds.
type page interface {
	collection() *types.Collection
	items() int
}

// pager is how followPages reaches a /v3 collection: where a next link
// may be requested (the link on Rancher's origin, or why not), and how a
// page is fetched by its link (what describes it, for errors).
type pager[P any] struct {
	onOrigin func(link string) (string, error)
	next     func(what, link string, p P) error
}

// listingPager pages through the listing's norman client.
func listingPager[P any](l *listing) pager[P] {
	return pager[P]{onOrigin: l.onOrigin, next: func(_, link string, p P) error { return l.ops.DoNext(link, p) }}
}

// followPages reads every page of a /v3 collection: first fetches page
// one, then each pagination.next through pg (on Rancher's origin, never an
// earlier page's). take judges and keeps each page, or its fetch error;
// name starts the page's description ("<name> page <n>"). Any failed page
// fails the whole: a missing page is not an empty one; so does a last
// page (no next link) when the pages held fewer items than its
// pagination.total (norman's count of the whole collection at that
// request): a next link lost on the way, or pages cut short. A last page
// without a total after pages that gave one is not complete either: norman
// gives the total on every page of a limited listing.
func followPages[P interface {
	*T
	page
}, T any](pg pager[P], op, name string, first func(P) error, take func(what string, p P, err error) error) error {
	p := P(new(T))
	err := first(p)
	seenLinks := map[string]bool{}
	what := name + " page 1"
	var got int64
	counted := false // an earlier page gave a pagination.total
	for n := 2; ; n++ {
		if err := take(what, p, err); err != nil {
			return err
		}
		got += int64(p.items())
		next := ""
		c := p.collection()
		if c.Pagination != nil {
			next = c.Pagination.Next
		}
		total := c.Pagination != nil && c.Pagination.Total != nil
		if next == "" { // the last page (partial is set on every page after the first too)
			switch {
			case total && got < *c.Pagination.Total:
				return invalid(op, "%s: the pages held %d items of the %d its pagination counts", what, got, *c.Pagination.Total)
			case !total && counted:
				return invalid(op, "%s: the last page gives no pagination total where the pages before it did", what)
			}
			return nil
		}
		counted = counted || total
		link, lerr := pg.onOrigin(next)
		if lerr != nil {
			return invalid(op, "%s: next link: %w", what, lerr)
		}
		if seenLinks[link] {
			return invalid(op, "%s: next link points back at an earlier page", what)
		}
		seenLinks[link] = true
		p, what = P(new(T)), fmt.Sprintf("%s page %d", name, n)
		err = pg.next(what, link, p)
	}
}
