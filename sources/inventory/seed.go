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
// they are gone deletes their Secrets.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// checkSeed returns an error when st is seeding and clusters, a complete
// prepared listing, lacks a mass of the clusters Seed names. A cluster
// listed in any phase, leaving included, is not lacking.
func (inv *Inventory) checkSeed(ctx context.Context, st *sourceState, clusters []sources.Cluster) error {
	inv.mu.Lock()
	seeding := st.seeding
	inv.mu.Unlock()
	if !seeding {
		return nil
	}
	ids, err := inv.seed(ctx, st.spec.Name)
	if err != nil {
		return fmt.Errorf("read the clusters served before the ledger: %w", err)
	}
	listed := make(map[string]bool, len(clusters))
	for i := range clusters {
		listed[clusters[i].Key()] = true
	}
	var missing []string
	for _, id := range ids {
		if !listed[id] {
			missing = append(missing, id)
		}
	}
	if !inv.rule.isDrop(len(missing), len(ids)) {
		return nil
	}
	slices.Sort(missing)
	example := missing[:min(3, len(missing))]
	return fmt.Errorf("the first listing into the ledger lacks %d of the %d clusters served before it (%s): refused, "+
		"so that no Application is deleted; it is taken once they are listed again, or once their cluster Secrets, "+
		"deleted by an operator who checked they are gone, no longer name them", len(missing), len(ids), strings.Join(example, ", "))
}
