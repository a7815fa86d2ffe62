// Package static is a source of clusters listed in YAML, inline in the
// configuration or in a file that is re-read when its content changes.
package static

import (
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"
	"slices"
	"sync"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Config is the static source's section of the configuration. Clusters from
// File and inline Clusters are listed together; names must be unique.
type Config struct {
	// File holds a YAML document `clusters: [...]`. A relative path is
	// taken from the directory of the configuration file.
	File     string    `json:"file,omitempty"`
	Clusters []Cluster `json:"clusters,omitempty"`
}

// Cluster is one cluster as written in YAML.
type Cluster struct {
	Name              string            `json:"name"`
	Server            string            `json:"server"`
	CAData            string            `json:"caData,omitempty"`
	Auth              Auth              `json:"auth,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Region            string            `json:"region,omitempty"`
	Account           string            `json:"account,omitempty"`
	Tenant            string            `json:"tenant,omitempty"`
	Project           string            `json:"project,omitempty"`
	Namespaces        []string          `json:"namespaces,omitempty"`
	ClusterResources  bool              `json:"clusterResources,omitempty"`
	KubernetesVersion string            `json:"kubernetesVersion,omitempty"`
	State             string            `json:"state,omitempty"`
	// ID is the cluster's identity, stable across renames (its Secret is
	// found by it); default: the name.
	ID string `json:"id,omitempty"`
	// Phase is where the cluster is in its lifecycle: pending, ready (the
	// default), degraded or leaving (see "Cluster lifecycle" in the README).
	Phase sources.Phase `json:"phase,omitempty"`
	// Ready defaults to true; set it to false (with NotReadyReason) to list a
	// cluster that must be neither served nor given a Secret yet.
	Ready          *bool  `json:"ready,omitempty"`
	NotReadyReason string `json:"notReadyReason,omitempty"`
}

// Auth is how Argo CD authenticates to a static cluster: at most one field.
// Secret values are never written here, only references to them.
type Auth struct {
	BearerToken *sources.SecretRef    `json:"bearerToken,omitempty"`
	AWS         *sources.AWSAuth      `json:"aws,omitempty"`
	Exec        *sources.ExecProvider `json:"exec,omitempty"`
}

// file is the clusters file. Clusters is a pointer so that a file without
// the key (empty, or caught half-written) is an error, not "no clusters":
// an empty list must be written as `clusters: []`.
type file struct {
	Clusters *[]Cluster `json:"clusters"`
}

// Source lists static clusters.
type Source struct {
	path   string
	inline []sources.Cluster

	mu sync.Mutex
	// lastSum is the SHA-256 of the file content fromFile was parsed from
	// (a digest rather than the content: at 10,000 clusters the file is
	// over 10 MiB).
	lastSum  [sha256.Size]byte
	fromFile []sources.Cluster
	// failed is the error of the last content that failed to decode,
	// failedSum its SHA-256.
	failedSum [sha256.Size]byte
	failed    error
}

// New builds the source of cfg; a relative File is taken from baseDir
// (SetDirectory). When cfg names a file, the file is read and validated
// once, so that a broken file is a start-up error.
func New(cfg Config, baseDir string) (*Source, error) {
	cfg.Clusters = slices.Clone(cfg.Clusters) // SetDirectory writes to them
	cfg.SetDirectory(baseDir)
	s := &Source{}
	inline, err := convert(cfg.Clusters, "clusters", "")
	if err != nil {
		return nil, err
	}
	s.inline = inline
	if cfg.File == "" {
		if len(cfg.Clusters) == 0 {
			return nil, fmt.Errorf("set file or clusters")
		}
		return s, nil
	}
	s.path = cfg.File
	if _, err := s.Clusters(context.Background()); err != nil {
		return nil, err
	}
	// the file is valid: its clusters are read again at the first listing.
	// A replica that never leads never lists, and would hold a fleet's
	// worth of clusters (12 MiB at 10,000 with their CAs) for nothing.
	s.mu.Lock()
	s.fromFile, s.lastSum = nil, [sha256.Size]byte{}
	s.mu.Unlock()
	return s, nil
}

// Clusters returns the inline clusters and those of the file, re-reading and
// re-validating the file when its content changed. A file that cannot be
// read or is invalid fails the listing. Without inline clusters, the
// file's clusters are handed out as they were decoded, the same slice for
// as long as the file does not change (see sources.Source).
func (s *Source) Clusters(ctx context.Context) ([]sources.Cluster, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if s.path == "" {
		return append([]sources.Cluster(nil), s.inline...), nil
	}
	fromFile, err := s.readFile()
	if err != nil {
		return nil, err
	}
	if len(s.inline) == 0 {
		return fromFile[:len(fromFile):len(fromFile)], nil // an append by the caller copies
	}
	// names and servers are unique among the inline clusters, and among
	// the file's
	names, servers := make(map[string]bool, len(s.inline)), make(map[string]bool, len(s.inline))
	for _, c := range s.inline {
		names[c.Name], servers[sources.ServerKey(c.Server)] = true, true
	}
	for _, c := range fromFile {
		if names[c.Name] {
			return nil, fmt.Errorf("cluster %s is listed both inline and in %s", c.Name, s.path)
		}
		if servers[sources.ServerKey(c.Server)] {
			return nil, fmt.Errorf("cluster %s of %s: its server %s is also an inline cluster's", c.Name, s.path, c.Server)
		}
	}
	return append(append(make([]sources.Cluster, 0, len(s.inline)+len(fromFile)), s.inline...), fromFile...), nil
}

// convert maps YAML clusters to the model, validating each one; field
// names the YAML path in errors.
func convert(in []Cluster, field, dir string) ([]sources.Cluster, error) {
	conv := newConverter(field, len(in), dir)
	for _, sc := range in {
		if err := conv.add(sc); err != nil {
			return nil, err
		}
	}
	return conv.clusters(), nil
}

// converter maps YAML clusters to the model one at a time, in file order:
// it validates each, checks that names are unique, and shares the
// strings and maps clusters have in common.
type converter struct {
	field string // the YAML path of the list, for errors
	dir   string // a relative bearerToken.file is taken from here
	// done holds the full blocks of clusters, cur the one being filled:
	// blocks rather than one growing slice, which would leave several
	// times the listing's size in garbage while decoding a file.
	done    [][]sources.Cluster
	cur     []sources.Cluster
	n       int
	seen    map[string]int // index by name
	servers map[string]int // index by sources.ServerKey
	strs    *sources.Interner
}

// convertBlock is the number of clusters in a block after the first.
const convertBlock = 256

// newConverter returns a converter for about n clusters, whose relative
// bearerToken.file references are taken from dir (none: as written).
func newConverter(field string, n int, dir string) *converter {
	return &converter{field: field, dir: dir, cur: make([]sources.Cluster, 0, n), seen: make(map[string]int, n), servers: make(map[string]int, n), strs: sources.NewInterner()}
}

// add maps the next cluster of the list.
func (cv *converter) add(sc Cluster) error {
	i := cv.n
	if j, dup := cv.seen[sc.Name]; dup && sc.Name != "" {
		return fmt.Errorf("%s[%d].name: %q is already used by %s[%d]", cv.field, i, sc.Name, cv.field, j)
	}
	cv.seen[sc.Name] = i
	c, err := toCluster(sc)
	if err != nil {
		return fmt.Errorf("%s[%d]: %w", cv.field, i, err)
	}
	// two clusters on one server would be one cluster in Argo CD: the
	// inventory would serve one of them, a copy-paste mistake is likelier
	key := sources.ServerKey(c.Server)
	if j, dup := cv.servers[key]; dup {
		return fmt.Errorf("%s[%d].server: %s is already the server of %s[%d]", cv.field, i, c.Server, cv.field, j)
	}
	cv.servers[key] = i
	c.Auth.TokenRef = inDir(c.Auth.TokenRef, cv.dir)
	cv.strs.Cluster(&c)
	if len(cv.cur) == cap(cv.cur) {
		if len(cv.cur) > 0 {
			cv.done = append(cv.done, cv.cur)
		}
		cv.cur = make([]sources.Cluster, 0, convertBlock)
	}
	cv.cur = append(cv.cur, c)
	cv.n++
	return nil
}

// clusters returns the clusters added, in a slice of their number.
func (cv *converter) clusters() []sources.Cluster {
	if len(cv.done) == 0 && len(cv.cur) == cap(cv.cur) {
		return cv.cur
	}
	out := make([]sources.Cluster, 0, cv.n)
	for _, b := range cv.done {
		out = append(out, b...)
	}
	return append(out, cv.cur...)
}

// clusterError is a problem of one field of a YAML cluster.
type clusterError struct{ field, detail string }

func (e *clusterError) Error() string { return e.field + ": " + e.detail }

// toCluster is the pure mapping from a YAML cluster to the model.
func toCluster(sc Cluster) (sources.Cluster, error) {
	if sc.Name == "" {
		return sources.Cluster{}, &clusterError{"name", "required"}
	}
	server, err := sources.NormalizeServer(sc.Server)
	if err != nil {
		return sources.Cluster{}, &clusterError{"server", err.Error()}
	}
	c := sources.Cluster{
		Provider: sources.ProviderStatic, Name: sc.Name, Server: server,
		Labels: sc.Labels, Annotations: sc.Annotations, Region: sc.Region, Account: sc.Account,
		Tenant: sc.Tenant, Project: sc.Project, Namespaces: sc.Namespaces, ClusterResources: sc.ClusterResources,
		KubernetesVersion: sc.KubernetesVersion, State: sc.State, Ready: true, ID: sc.ID, Phase: sc.Phase,
	}
	if !c.Phase.Valid() || c.Phase == sources.PhaseAbsent {
		return sources.Cluster{}, &clusterError{"phase", fmt.Sprintf("%q is not one of pending, ready, degraded, leaving", sc.Phase)}
	}
	if sc.Ready != nil && !*sc.Ready {
		c.Ready, c.NotReadyReason = false, sc.NotReadyReason
	}
	if sc.Auth.BearerToken != nil && sc.Auth.BearerToken.Issued != nil {
		return sources.Cluster{}, &clusterError{"auth", "bearerToken.issued is set by sources only"}
	}
	switch {
	case sc.Auth.BearerToken != nil:
		c.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: sc.Auth.BearerToken}
	case sc.Auth.AWS != nil:
		c.Auth = sources.Auth{Kind: sources.AuthAWS, AWS: sc.Auth.AWS}
	case sc.Auth.Exec != nil:
		c.Auth = sources.Auth{Kind: sources.AuthExec, Exec: sc.Auth.Exec}
	}
	if sc.Auth.BearerToken != nil && (sc.Auth.AWS != nil || sc.Auth.Exec != nil) || sc.Auth.AWS != nil && sc.Auth.Exec != nil {
		return sources.Cluster{}, &clusterError{"auth", "set at most one of bearerToken, aws and exec"}
	}
	if err := c.Auth.Validate(); err != nil {
		return sources.Cluster{}, &clusterError{"auth", err.Error()}
	}
	if sc.CAData != "" {
		if c.CA, err = sources.ParseCAData(sc.CAData); err != nil {
			return sources.Cluster{}, &clusterError{"caData", err.Error()}
		}
	}
	return c, nil
}

// inDir returns ref with a relative file taken from dir: the directory of
// the file that names it. ref itself is left as it is.
func inDir(ref *sources.SecretRef, dir string) *sources.SecretRef {
	if ref == nil || ref.File == "" || dir == "" || filepath.IsAbs(ref.File) {
		return ref
	}
	r := *ref
	r.File = filepath.Join(dir, r.File)
	return &r
}
