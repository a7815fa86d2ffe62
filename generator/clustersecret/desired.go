// Package clustersecret keeps Argo CD cluster Secrets in step with the
// inventory: Cluster → desired Secret (this file, pure), desired vs current
// → a plan (plan.go, pure), and the reconciler that applies a plan through
// the Kubernetes API (reconciler.go), only in Argo CD's namespace, only on
// Secrets it owns, and only while it holds the leader lease.
package clustersecret

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"
	"text/template"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Labels and annotations this package writes.
const (
	// LabelSecretType makes Argo CD read the Secret as a cluster.
	LabelSecretType = "argocd.argoproj.io/secret-type"
	// LabelManagedBy marks every Secret we write.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "argocd-cluster-discovery"
	// LabelOwner holds the owner id of the deployment that wrote the
	// Secret; a Secret without our owner id is never updated or deleted.
	LabelOwner = "argocd-cluster-discovery.io/owner"
	// LabelSource names the source that listed the cluster.
	LabelSource = "argocd-cluster-discovery.io/source"
	// LabelPin, set to "true" by a person, exempts a Secret from pruning.
	LabelPin = "argocd-cluster-discovery.io/pin"

	// AnnotationCluster holds the cluster name (names may exceed a label's
	// 63 characters).
	AnnotationCluster = "argocd-cluster-discovery.io/cluster"
	// AnnotationClusterID holds the cluster's identity in its source (see
	// sources.Cluster.ID): with LabelSource it says which cluster the
	// Secret is for, across renames. A Secret of ours whose identity
	// differs from the desired one is never updated.
	AnnotationClusterID = "argocd-cluster-discovery.io/cluster-id"
	// LabelPhase and LabelState carry the cluster's lifecycle phase and
	// upstream state (when it is a valid label value).
	LabelPhase = "argocd-cluster-discovery.io/phase"
	LabelState = "argocd-cluster-discovery.io/state"
	// AnnotationLabels and AnnotationAnnotations list the label and
	// annotation keys we propagated, so that keys that disappear upstream
	// are removed while keys added by people are kept.
	AnnotationLabels      = "argocd-cluster-discovery.io/propagated-labels"
	AnnotationAnnotations = "argocd-cluster-discovery.io/propagated-annotations"
	// The prune countdown of a Secret whose cluster left its source.
	AnnotationMissingSince    = "argocd-cluster-discovery.io/missing-since"
	AnnotationMissingListings = "argocd-cluster-discovery.io/missing-listings"
	AnnotationMissingListing  = "argocd-cluster-discovery.io/missing-last-listing"
)

// Data keys of an Argo CD cluster Secret that we own. Other keys (e.g.
// shard, set by a person) are left alone.
var ownedDataKeys = []string{"name", "server", "config", "project", "namespaces", "clusterResources"}

// TenantRule scopes the clusters of a tenant; the inventory applies it
// (see sources.TenantRule), so the Secret and the plugin answer agree.
type TenantRule = sources.TenantRule

// CredentialOverride replaces the credentials a source describes, for all
// clusters of that source: at most one field.
type CredentialOverride struct {
	// Exec is an exec provider whose command, args and env values are Go
	// templates over ClusterFields ({{.Name}}, {{.Server}}, {{.Region}},
	// {{.Account}}, {{.Tenant}}, {{.Source}}), for token brokers that mint
	// short-lived tokens.
	Exec *sources.ExecProvider `json:"exec,omitempty"`
	// BearerToken is read from a reference (typically a key of a Secret in
	// Argo CD's namespace), for clusters that cannot use exec plugins.
	BearerToken *sources.SecretRef `json:"bearerToken,omitempty"`
}

// Options shape the desired Secrets.
type Options struct {
	// Namespace is Argo CD's namespace.
	Namespace string
	// OwnerID identifies this deployment; required.
	OwnerID string
	// Prefix starts every Secret name (default "cluster").
	Prefix string
	// Credentials maps a source name to a credential override.
	Credentials map[string]CredentialOverride
}

// ClusterFields are the values credential templates can use.
type ClusterFields struct {
	Name, Server, Region, Account, Tenant, Source, Provider string
}

// Desired is the Secret a cluster should have. Secret.Data["config"] holds
// the bearer token in clear when the cluster uses one: never log a Desired.
//
// Plan reads only the Secret's name, server and digest, which a Desired
// keeps apart from the Secret: a pass keeps the Desired of each cluster
// without its Secret (Compact) and renders the Secret again where it is
// written (Render), so that it does not hold every cluster's config at
// once.
type Desired struct {
	Cluster string
	Source  string
	// ID is the cluster's identity in its source (sources.Cluster.Key).
	ID string
	// Secret is the desired Secret; nil in a compact Desired.
	Secret *corev1.Secret

	// name and server are the Secret's name and server.
	name, server string
	// digest is the digest of the Secret's owned content (ownedDigest);
	// covered tells whether it covers every label and annotation of the
	// Secret (covers).
	digest  [sha256.Size]byte
	covered bool
	// cluster and opts are what Build made the Secret from.
	cluster *sources.Cluster
	opts    *Options
}

// GetName returns the name of the desired Secret.
func (d Desired) GetName() string { return d.name }

// Compact returns d without its Secret.
func (d Desired) Compact() Desired {
	d.Secret = nil
	return d
}

// Render returns the desired Secret, built again for a compact Desired
// (with resolve, as Build). The Secret is the caller's to modify.
func (d Desired) Render(resolve TokenResolver) (*corev1.Secret, error) {
	if d.Secret != nil {
		return d.Secret.DeepCopy(), nil
	}
	if d.cluster == nil {
		return nil, fmt.Errorf("cluster %s: no desired secret", d.Cluster)
	}
	again, err := Build(d.cluster, d.opts, resolve)
	if err != nil {
		return nil, err
	}
	if again.digest != d.digest {
		return nil, fmt.Errorf("cluster %s: the desired secret changed since the plan", d.Cluster)
	}
	return again.Secret, nil
}

// TokenResolver reads the value behind a secret reference.
type TokenResolver func(ref sources.SecretRef) (string, error)

// clusterConfig is the config key of an Argo CD cluster Secret
// (ClusterConfig in argo-cd pkg/apis/application/v1alpha1/types.go).
type clusterConfig struct {
	BearerToken        string              `json:"bearerToken,omitempty"`
	TLSClientConfig    tlsClientConfig     `json:"tlsClientConfig"`
	AWSAuthConfig      *awsAuthConfig      `json:"awsAuthConfig,omitempty"`
	ExecProviderConfig *execProviderConfig `json:"execProviderConfig,omitempty"`
	ProxyURL           string              `json:"proxyUrl,omitempty"`
}

type tlsClientConfig struct {
	Insecure bool `json:"insecure"`
	// CAData is base64 PEM ([]byte in Argo CD, so base64 in JSON).
	CAData string `json:"caData,omitempty"`
}

type awsAuthConfig struct {
	ClusterName string `json:"clusterName"`
	RoleARN     string `json:"roleARN,omitempty"`
}

type execProviderConfig struct {
	Command    string            `json:"command"`
	Args       []string          `json:"args,omitempty"`
	Env        map[string]string `json:"env,omitempty"`
	APIVersion string            `json:"apiVersion,omitempty"`
}

// DefaultPrefix starts the Secret names when Options.Prefix is empty.
const DefaultPrefix = "cluster"

// prefix is the prefix of the Secret names.
func (o *Options) prefix() string {
	if o.Prefix == "" {
		return DefaultPrefix
	}
	return o.Prefix
}

// Validate returns every problem of the options, each with its path under
// path; it changes nothing.
func (o *Options) Validate(path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if o.OwnerID == "" {
		errs = append(errs, field.Required(path.Child("ownerID"), "two deployments with different owner ids never touch each other's Secrets"))
	} else if msgs := validation.IsValidLabelValue(o.OwnerID); len(msgs) > 0 {
		errs = append(errs, field.Invalid(path.Child("ownerID"), o.OwnerID, strings.Join(msgs, "; ")))
	}
	if o.Namespace == "" {
		errs = append(errs, field.Required(path.Child("namespace"), ""))
	}
	if p := o.prefix(); len(validation.IsDNS1123Label(p)) > 0 || len(p) > 40 {
		errs = append(errs, field.Invalid(path.Child("prefix"), o.Prefix, "must be a DNS label of at most 40 characters"))
	}
	for _, src := range slices.Sorted(maps.Keys(o.Credentials)) {
		ov, at := o.Credentials[src], path.Child("credentials").Key(src)
		if ov.Exec != nil && ov.BearerToken != nil {
			errs = append(errs, field.Invalid(at, field.OmitValueType{}, "set exec or bearerToken, not both"))
		}
		if ov.Exec != nil {
			if _, err := renderExec(ov.Exec, ClusterFields{}); err != nil {
				errs = append(errs, field.Invalid(at.Child("exec"), field.OmitValueType{}, err.Error()))
			}
		}
		switch {
		case ov.BearerToken == nil:
		case ov.BearerToken.Issued != nil:
			errs = append(errs, field.Forbidden(at.Child("bearerToken", "issued"), "set by sources only"))
		default:
			if err := ov.BearerToken.Validate(); err != nil {
				errs = append(errs, field.Invalid(at.Child("bearerToken"), field.OmitValueType{}, err.Error()))
			}
		}
	}
	return errs
}

// SecretName is deterministic, DNS-safe and unique per cluster identity:
// <prefix>-<source>-<cluster name> and a short hash of (source, id) (see
// sources.HashedName). The name of a cluster's Secret does not change when
// the cluster is renamed: its Secret is found by identity and updated in
// place.
func SecretName(prefix, source, cluster, id string) string {
	return sources.HashedName(prefix+"-"+source+"-"+cluster, source+"\x00"+id)
}

// Build returns the desired Secret of a ready cluster. resolve reads token
// references; it is called only for clusters that use a bearer token.
func Build(c *sources.Cluster, o *Options, resolve TokenResolver) (Desired, error) {
	cfg := clusterConfig{TLSClientConfig: tlsClientConfig{CAData: c.CA.Data()}, ProxyURL: c.ProxyURL}
	fields := ClusterFields{Name: c.Name, Server: c.Server, Region: c.Region, Account: c.Account, Tenant: c.Tenant, Source: c.Source, Provider: string(c.Provider)}
	auth := authOf(c, o)
	switch auth.Kind {
	case sources.AuthBearerToken:
		token, err := resolve(*auth.TokenRef)
		if err != nil {
			return Desired{}, fmt.Errorf("cluster %s: read token %s: %w", c.Name, auth.TokenRef.String(), err)
		}
		cfg.BearerToken = token
	case sources.AuthAWS:
		cfg.AWSAuthConfig = &awsAuthConfig{ClusterName: auth.AWS.ClusterName, RoleARN: auth.AWS.RoleARN}
	case sources.AuthExec:
		e, err := renderExec(auth.Exec, fields)
		if err != nil {
			return Desired{}, fmt.Errorf("cluster %s: exec provider: %w", c.Name, err)
		}
		cfg.ExecProviderConfig = e
	}
	configJSON, err := json.Marshal(cfg)
	if err != nil {
		return Desired{}, fmt.Errorf("cluster %s: encode config: %w", c.Name, err)
	}

	project, namespaces, clusterResources := c.Project, c.Namespaces, c.ClusterResources
	data := map[string][]byte{"name": []byte(c.Name), "server": []byte(c.Server), "config": configJSON}
	if project != "" {
		data["project"] = []byte(project)
	}
	if len(namespaces) > 0 {
		data["namespaces"] = []byte(strings.Join(namespaces, ","))
	}
	if clusterResources {
		data["clusterResources"] = []byte("true")
	}

	labels := propagatedLabels(c)
	annotations := maps.Clone(c.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	for k := range annotations {
		if reservedAnnotation(k) {
			delete(annotations, k)
		}
	}
	propagated := sortedKeys(annotations)
	annotations[AnnotationLabels] = strings.Join(sortedKeys(labels), ",")
	annotations[AnnotationAnnotations] = strings.Join(propagated, ",")
	annotations[AnnotationCluster] = c.Name
	annotations[AnnotationClusterID] = c.Key()
	labels[LabelPhase] = string(c.Phase.OrReady())
	if c.State != "" && len(validation.IsValidLabelValue(c.State)) == 0 {
		labels[LabelState] = c.State
	}
	labels[LabelSecretType] = "cluster"
	labels[LabelManagedBy] = ManagedByValue
	labels[LabelOwner] = o.OwnerID
	labels[LabelSource] = c.Source

	s := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: SecretName(o.prefix(), c.Source, c.Name, c.Key()), Namespace: o.Namespace, Labels: labels, Annotations: annotations},
		Type:       corev1.SecretTypeOpaque,
		Data:       data,
	}
	return desiredOf(s, c, o), nil
}

// desiredOf returns the Desired of s, built from c with o.
func desiredOf(s *corev1.Secret, c *sources.Cluster, o *Options) Desired {
	d := Desired{Cluster: c.Name, Source: c.Source, ID: c.Key(), Secret: s, name: s.Name, server: string(s.Data["server"]),
		covered: covers(s), cluster: c, opts: o}
	copy(d.digest[:], ownedDigest(s))
	return d
}

// safeField matches what an upstream value may be to reach an exec
// provider's command, args or env: a name, region, account, tenant,
// source or provider, starting with a letter or digit (never a dash, which
// the broker would read as a flag) and without spaces, quotes or control
// characters.
var safeField = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@/+=-]*$`)

// checkFields refuses, before any template uses them, the fields of f that
// come from upstream and are not safeField (Server is a normalized URL).
func checkFields(f ClusterFields) error {
	for _, v := range []struct{ name, value string }{{"Name", f.Name}, {"Region", f.Region}, {"Account", f.Account},
		{"Tenant", f.Tenant}, {"Source", f.Source}, {"Provider", f.Provider}} {
		if v.value != "" && !safeField.MatchString(v.value) {
			return fmt.Errorf("{{.%s}} is %q: not a value an exec template may use (a letter or digit first, then letters, digits and ._:@/+=-)",
				v.name, v.value)
		}
	}
	return nil
}

func renderExec(e *sources.ExecProvider, f ClusterFields) (*execProviderConfig, error) {
	render := func(s string) (string, error) {
		if !strings.Contains(s, "{{") {
			return s, nil
		}
		if err := checkFields(f); err != nil {
			return "", err
		}
		t, err := template.New("").Option("missingkey=error").Parse(s)
		if err != nil {
			return "", err
		}
		var b bytes.Buffer
		if err := t.Execute(&b, f); err != nil {
			return "", err
		}
		return b.String(), nil
	}
	out := &execProviderConfig{APIVersion: e.APIVersion}
	if out.APIVersion == "" {
		out.APIVersion = "client.authentication.k8s.io/v1beta1"
	}
	var err error
	if out.Command, err = render(e.Command); err != nil {
		return nil, fmt.Errorf("command: %w", err)
	}
	for i, a := range e.Args {
		v, err := render(a)
		if err != nil {
			return nil, fmt.Errorf("args[%d]: %w", i, err)
		}
		out.Args = append(out.Args, v)
	}
	if len(e.Env) > 0 {
		out.Env = map[string]string{}
		for _, k := range sortedKeys(e.Env) {
			v, err := render(e.Env[k])
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", k, err)
			}
			out.Env[k] = v
		}
	}
	return out, nil
}

func sortedKeys(m map[string]string) []string {
	keys := slices.Collect(maps.Keys(m))
	sort.Strings(keys)
	return keys
}

// Redacted returns a copy of s whose config has its bearer token replaced,
// for dry-run output and logs.
func Redacted(s *corev1.Secret) *corev1.Secret {
	out := s.DeepCopy()
	var cfg map[string]any
	if err := json.Unmarshal(out.Data["config"], &cfg); err == nil {
		if _, ok := cfg["bearerToken"]; ok {
			cfg["bearerToken"] = "<redacted>"
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		_ = enc.Encode(cfg) // decoded from JSON: encodes again
		out.Data["config"] = bytes.TrimSpace(b.Bytes())
	} else if len(out.Data["config"]) > 0 {
		out.Data["config"] = []byte("<redacted>")
	}
	return out
}
