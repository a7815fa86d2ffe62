package generator

import (
	"encoding/json"
	"fmt"
	"regexp"
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
}

// Metadata mirrors the cluster generator's metadata: never null, so that
// templates can index it.
type Metadata struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// response is the body Argo CD's plugin generator expects.
type response struct {
	Output struct {
		Parameters []Parameters `json:"parameters"`
	} `json:"output"`
}

var invalidDNSNameChars = regexp.MustCompile(`[^-a-z0-9.]`)

// SanitizeName applies the rule of Argo CD's utils.SanitizeName, which the
// cluster generator uses for nameNormalized: lower case, every character
// other than [-a-z0-9.] replaced by '-', at most 253 characters, leading and
// trailing '-' and '.' trimmed.
func SanitizeName(name string) string {
	name = invalidDNSNameChars.ReplaceAllString(strings.ToLower(name), "-")
	if len(name) > 253 {
		name = name[:253]
	}
	return strings.Trim(name, "-.")
}

// ClusterParameters renders one cluster. Nothing secret is read: the model
// holds none.
func ClusterParameters(c *sources.Cluster) Parameters {
	p := Parameters{
		Name: c.Name, NameNormalized: SanitizeName(c.Name), Server: c.Server, Project: c.Project,
		Metadata: Metadata{Labels: c.Labels, Annotations: c.Annotations},
		Provider: string(c.Provider), Source: c.Source, Region: c.Region, Tenant: c.Tenant,
		KubernetesVersion: c.KubernetesVersion,
	}
	if p.Metadata.Labels == nil {
		p.Metadata.Labels = map[string]string{}
	}
	if p.Metadata.Annotations == nil {
		p.Metadata.Annotations = map[string]string{}
	}
	return p
}

// UnavailableError means the answer is not known yet: a source the request
// could match has never completed a listing. It becomes a 503, never an
// empty 200, because Argo CD deletes Applications on an empty 200.
type UnavailableError struct{ Sources []string }

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("source(s) %s have not completed a listing yet; refusing to answer with incomplete parameters (Argo CD will retry)", strings.Join(e.Sources, ", "))
}

// Result is a rendered, encoded answer.
type Result struct {
	// Body is the encoded response.
	Body []byte
	// Count is the number of parameter sets.
	Count int
	// Stale names the selected sources whose latest listing failed; their
	// last complete listing was used.
	Stale string

	// stale is the header value prepared once, shared read-only by every
	// answer.
	stale []string
}

// Render answers a filter from a snapshot. It fails with *InputError when
// the filter names a source or provider that is not configured, and with
// *UnavailableError when a source it could select has not synced.
func Render(snap *inventory.Snapshot, f *Filter) (Result, error) {
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
	var unsynced, stale []string
	for _, st := range snap.Sources {
		if !f.MaySelect(st.Name, st.Provider) {
			continue
		}
		if !st.Synced {
			unsynced = append(unsynced, st.Name)
		}
		if st.Stale {
			stale = append(stale, st.Name)
		}
	}
	if len(unsynced) > 0 {
		return Result{}, &UnavailableError{Sources: unsynced}
	}
	var resp response
	resp.Output.Parameters = []Parameters{}
	for i := range snap.Clusters {
		c := &snap.Clusters[i]
		if c.Ready && f.Match(c) {
			resp.Output.Parameters = append(resp.Output.Parameters, ClusterParameters(c))
		}
	}
	body, err := json.Marshal(&resp)
	if err != nil {
		return Result{}, fmt.Errorf("encode parameters: %w", err)
	}
	res := Result{Body: body, Count: len(resp.Output.Parameters), Stale: strings.Join(stale, ",")}
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
