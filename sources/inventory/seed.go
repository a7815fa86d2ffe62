package inventory

// Seeding: the first listings of a source into an empty ledger. A version
// without a ledger kept what it served in memory only; what it left behind
// is its cluster Secrets. Until the ledger holds a complete listing of a
// source, each listing is compared with the clusters Options.Seed names:
// one that lacks a mass of them (a token that lost its access answers
// `200 []`) would make the new version serve a 200 without them and Argo CD
// delete their Applications, so it is refused. The source stays unsynced
// (the answer a 503, Argo CD keeps everything) until they are listed
// again, or until Seed no longer names them: an operator who checked that
// they are gone deletes their Secrets. The clusters it names that are
// listed hold their names, as they held them in the previous version's
// answer: a cluster listed under the same name is the newcomer.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// checkSeed returns an error when st is seeding and clusters, a complete
// prepared listing, lacks a mass of the clusters Seed names. A cluster
// listed in any phase, leaving included, is not lacking. Otherwise it
// returns the identities of the listed clusters Seed names (none when st
// is not seeding): they were served before, and keep their names (see
// lifecycle.holdNames).
func (inv *Inventory) checkSeed(ctx context.Context, st *sourceState, clusters []sources.Cluster) ([]string, error) {
	inv.mu.Lock()
	seeding := st.seeding
	inv.mu.Unlock()
	if !seeding {
		return nil, nil
	}
	ids, err := inv.seed(ctx, st.spec.Name)
	if err != nil {
		return nil, fmt.Errorf("read the clusters served before the ledger: %w", err)
	}
	listed := make(map[string]bool, len(clusters))
	for i := range clusters {
		listed[clusters[i].Key()] = true
	}
	var missing, before []string
	for _, id := range ids {
		if listed[id] {
			before = append(before, id)
		} else {
			missing = append(missing, id)
		}
	}
	if !inv.rule.isDrop(len(missing), len(ids)) {
		return before, nil
	}
	slices.Sort(missing)
	example := missing[:min(3, len(missing))]
	return nil, fmt.Errorf("the first listing into the ledger lacks %d of the %d clusters served before it (%s): refused, "+
		"so that no Application is deleted; it is taken once they are listed again, or once their cluster Secrets, "+
		"deleted by an operator who checked they are gone, no longer name them", len(missing), len(ids), strings.Join(example, ", "))
}

// holdNames makes the served clusters of ids (listed, and served before
// the ledger: see checkSeed) hold the names they are listed under, unless
// they hold one already: against another cluster listed under the same
// name (see Inventory.resolveNames) they keep it, as in the answer of the
// version before the ledger, instead of the name being served to neither
// and their Applications deleted.
func (l *lifecycle) holdNames(ids []string) {
	for _, id := range ids {
		if r := l.tracked[id]; r != nil && r.Served && r.Holds == "" && r.Rendering != nil {
			r.Holds = r.Rendering.Name
		}
	}
}
