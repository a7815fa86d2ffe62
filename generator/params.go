package generator

import (
	"fmt"
	"sort"
	"strings"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// Parameters is one parameter set: the keys of Argo CD's built-in cluster
// generator (name, nameNormalized, server, project, metadata.labels,
// metadata.annotations) plus ours. It never carries credentials.
type Parameters struct {
	Name              string   `json:"name"`
	NameNormalized    string   `json:"nameNormalized"`
	Server            string   `json:"server"`
	Project           string   `json:"project"`
	Metadata          Metadata `json:"metadata"`
	Provider          string   `json:"provider"`
	Source            string   `json:"source"`
	Region            string   `json:"region"`
	Tenant            string   `json:"tenant"`
	KubernetesVersion string   `json:"kubernetesVersion"`
	// Phase is the cluster's lifecycle phase (ready, degraded, leaving,
	// absent) and State the upstream state it was mapped from, so that
	// templates can react (a served cluster is never left out for them).
	Phase string `json:"phase"`
	State string `json:"state"`
}

// Metadata mirrors the cluster generator's metadata: never null, so that
// templates can index it.
type Metadata struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// response is the body Argo CD's plugin generator expects. Answers are
// not encoded from it but must equal its encoding (see Result).
type response struct {
	Output struct {
		Parameters []Parameters `json:"parameters"`
	} `json:"output"`
}

// ClusterParameters renders one cluster. Nothing secret is read: the model
// holds none.
func ClusterParameters(c *sources.Cluster) Parameters {
	p := Parameters{
		Name: c.Name, NameNormalized: sources.NormalizedName(c.Name), Server: c.Server, Project: c.Project,
		Metadata: Metadata{Labels: c.Labels, Annotations: c.Annotations},
		Provider: string(c.Provider), Source: c.Source, Region: c.Region, Tenant: c.Tenant,
		KubernetesVersion: c.KubernetesVersion, Phase: string(c.Phase.OrReady()), State: c.State,
	}
	if p.Metadata.Labels == nil {
		p.Metadata.Labels = map[string]string{}
	}
	if p.Metadata.Annotations == nil {
		p.Metadata.Annotations = map[string]string{}
	}
	return p
}

// UnavailableError means the answer is not known yet: the start-up
// barrier (see inventory.Snapshot.Waiting) waits for a configured source
// that has never completed a listing (Sources), or the ledger this
// replica follows does not add up (Reason). It becomes a 503, never a
// 200, because Argo CD deletes the Applications a 200 leaves out.
type UnavailableError struct {
	Sources []string
	Reason  string
}

func (e *UnavailableError) Error() string {
	if e.Reason != "" {
		return e.Reason + "; this replica has no answer yet (Argo CD will retry)"
	}
	return fmt.Sprintf("source(s) %s have not completed a listing yet; refusing to answer with incomplete parameters (Argo CD will retry)", strings.Join(e.Sources, ", "))
}

// Result is an answer: a selection of the clusters of an encoded snapshot.
// Write it with WriteTo or get its bytes with Bytes; it is byte for byte
// what json.Marshal makes of the parameter sets. The zero Result is the
// empty answer.
type Result struct {
	// Count is the number of parameter sets.
	Count int
	// Stale names the selected sources whose latest listing failed (their
	// last complete listing was used) or that have not completed one yet
	// once the start-up barrier is behind (none of their clusters is in
	// the answer yet).
	Stale string

	// stale is the header value prepared once, shared read-only by every
	// answer.
	stale []string
	// enc is the snapshot's encoding, runs the selected parts of it.
	enc  *encodedSnapshot
	runs []run
}

// Render answers a filter from a snapshot. It fails with *InputError when
// the filter names a source or provider that is not configured, and with
// *UnavailableError behind the start-up barrier.
//
// Render encodes the whole snapshot; the server encodes it once per
// snapshot version and shares that between filters.
func Render(snap *inventory.Snapshot, f *Filter) (Result, error) {
	return render(snap, f, encodeSnapshot)
}

// render is Render with the snapshot's encoding from encode, called only
// for a filter that may be answered.
func render(snap *inventory.Snapshot, f *Filter, encode func(*inventory.Snapshot) (*encodedSnapshot, error)) (Result, error) {
	for _, name := range f.Sources {
		if _, ok := snap.Source(name); !ok {
			return Result{}, inputErrorf("input.parameters.source: no source named %q is configured (configured: %s)", name, sourceNames(snap))
		}
	}
	for _, p := range f.Providers {
		found := false
		for _, st := range snap.Sources {
			found = found || string(st.Provider) == p
		}
		if !found {
			return Result{}, inputErrorf("input.parameters.provider: no %s source is configured (configured: %s)", p, sourceNames(snap))
		}
	}
	if snap.Unsettled != "" {
		return Result{}, &UnavailableError{Reason: snap.Unsettled}
	}
	if waiting := snap.Waiting(); len(waiting) > 0 {
		return Result{}, &UnavailableError{Sources: waiting}
	}
	var stale []string
	for _, st := range snap.Sources {
		if (st.Stale || !st.Synced) && f.MaySelect(st.Name, st.Provider) {
			stale = append(stale, st.Name)
		}
	}
	enc, err := encode(snap)
	if err != nil {
		return Result{}, err
	}
	runs, count, err := enc.selectRuns(snap, f)
	if err != nil {
		return Result{}, err
	}
	res := Result{Count: count, Stale: strings.Join(stale, ","), enc: enc, runs: runs}
	if res.Stale != "" {
		res.stale = []string{res.Stale}
	}
	return res, nil
}

func sourceNames(snap *inventory.Snapshot) string {
	var names []string
	for _, st := range snap.Sources {
		names = append(names, fmt.Sprintf("%s (%s)", st.Name, st.Provider))
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}
