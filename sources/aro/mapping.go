package aro

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/redhatopenshift/armredhatopenshift"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/azurearm"
)

// Keys this source sets beside the tags. They are outside the
// argocd-cluster-discovery.io/ prefix, which the cluster Secret writer
// reserves for itself, so that they reach the Secrets and Argo CD's
// cluster generator can select on them; an Azure tag key cannot hold '/',
// so no tag can write them.
const (
	reservedPrefix = "aro.argocd-cluster-discovery.io/"
	// LabelResourceGroup holds the cluster's resource group (sanitized
	// into a label value).
	LabelResourceGroup = reservedPrefix + "resource-group"
	// OpenShiftVersion holds the cluster's OpenShift version
	// (properties.clusterProfile.version, e.g. 4.15.27), which is not its
	// Kubernetes version: an annotation, verbatim, and a label when it is
	// a valid label value, so that the cluster generator can select on it.
	OpenShiftVersion = reservedPrefix + "openshift-version"
	// LabelAPIVisibility holds apiserverProfile.visibility: Public or
	// Private.
	LabelAPIVisibility = reservedPrefix + "api-visibility"
	// AnnotationResourceID holds the cluster's ARM resource id, as listed.
	AnnotationResourceID = reservedPrefix + "resource-id"
	// AnnotationConsoleURL holds the web console's URL
	// (consoleProfile.url, its trailing '/' trimmed).
	AnnotationConsoleURL = reservedPrefix + "console-url"
	// AnnotationSubscriptionState holds the state of the cluster's
	// subscription (PastDue, Warned, Disabled) when subscriptions are
	// discovered and the state is not Enabled.
	AnnotationSubscriptionState = reservedPrefix + "subscription-state"
)

// openShiftClusterType is the resource type, compared case-insensitively
// (the spec example spells it Microsoft.RedHatOpenShift/OpenShiftClusters,
// the resource provider openShiftClusters).
const openShiftClusterType = "Microsoft.RedHatOpenShift/openShiftClusters"

// skipReason says why a listed cluster is left out; it is the reason label
// of the skipped-clusters metric.
type skipReason = azurearm.SkipReason

const (
	skipResourceGroup            = azurearm.SkipResourceGroup
	skipTags                     = azurearm.SkipTags
	skipPrivate       skipReason = "private"
)

// Not-ready reasons, the reason label of the not-ready metric.
const (
	notReadyName     = "invalid_name"
	notReadyConflict = "name_conflict"
	notReadyServer   = "invalid_server"
	notReadyScope    = "invalid_scope"
	notReadyCA       = "ca_unavailable"
	notReadyToken    = "no_token"
	notReadyAgent    = "no_agent"
)

// notReadyKinds lists every not-ready reason, for the gauge to start at
// zero.
var notReadyKinds = []string{notReadyName, notReadyConflict, notReadyServer, notReadyScope, notReadyCA, notReadyToken, notReadyAgent}

// mapped is one listed cluster after mapping: either skipped, or a cluster
// for the listing.
type mapped struct {
	cluster sources.Cluster
	// id is the lower-cased resource id.
	id                          string
	subscription, resourceGroup string
	azureName                   string
	// state is the provisioningState ("unknown" when there is none),
	// counted before the filters.
	state        string
	skip         skipReason
	detail       string // why skipped, for the debug log
	notReadyKind string
}

// about is what the listing counts and logs of m.
func (m *mapped) about() azurearm.Listed {
	return azurearm.Listed{Subscription: m.subscription, ResourceGroup: m.resourceGroup, Name: m.azureName, State: m.state, Skip: m.skip, Detail: m.detail}
}

// listing is what one listing reads once for every cluster: the token
// Secrets bound to the clusters (by lower-case resource id) and the
// configured CAs, or in agent mode the agents' Secrets.
type listing struct {
	bindings map[string][]string
	trust    *trust
	agents   sources.AgentIndex
}

// mapper maps ARM OpenShift clusters to the model. It is built once from
// a validated Config and holds no state between listings.
type mapper struct {
	cfg  Config
	name *template.Template
	sel  *azurearm.Selector
}

func newMapper(cfg Config, log *slog.Logger) (*mapper, error) {
	t, err := parseNameTemplate(cfg.NameTemplate)
	if err != nil {
		return nil, fmt.Errorf("nameTemplate: %w", err)
	}
	return &mapper{cfg: cfg, name: t, sel: azurearm.NewSelector(cfg.selection(), log)}, nil
}

// phaseOf maps an ARO cluster's provisioningState to its phase, as tabled
// in the package doc. hasURL says whether the cluster reports an API
// server URL, which tells a failed operation on a cluster that ran
// (degraded) from a failed creation (pending). Values compare
// case-insensitively; any value not in the table is degraded, never
// absence.
func phaseOf(provisioningState string, hasURL bool) sources.Phase {
	switch strings.ToLower(provisioningState) {
	case "creating":
		return sources.PhasePending
	case "succeeded":
		return sources.PhaseReady
	case "failed":
		if hasURL {
			return sources.PhaseDegraded
		}
		return sources.PhasePending
	case "deleting":
		return sources.PhaseLeaving
	}
	// Updating, AdminUpdating, Canceled, and anything else (ARO-RP's
	// internal Maintenance, a value added later): the same cluster, not
	// healthy for now.
	return sources.PhaseDegraded
}

// toCluster maps one cluster of subscription sub with what the listing
// read (l). An error means the response is malformed and fails the
// listing; filters set skip instead. Whatever a cluster lacks (a name, a
// server, a CA, a token) lists it not ready with the reason, never
// absent.
func (m *mapper) toCluster(sub string, oc *armredhatopenshift.OpenShiftCluster, l *listing) (mapped, error) {
	rid, err := clusterID(sub, oc)
	if err != nil {
		return mapped{}, err
	}
	p := oc.Properties
	if p == nil {
		return mapped{}, fmt.Errorf("cluster %s has no properties", rid.Name)
	}
	out := mapped{
		id: strings.ToLower(*oc.ID), subscription: sub, resourceGroup: rid.ResourceGroupName, azureName: rid.Name,
		state: cmp.Or(string(azurearm.Deref(p.ProvisioningState)), "unknown"),
	}
	tags := azurearm.DerefTags(oc.Tags)
	var api armredhatopenshift.APIServerProfile
	if p.ApiserverProfile != nil {
		api = *p.ApiserverProfile
	}
	private := strings.EqualFold(string(azurearm.Deref(api.Visibility)), string(armredhatopenshift.VisibilityPrivate))
	if out.skip, out.detail = m.filter(rid.ResourceGroupName, tags, private); out.skip != "" {
		return out, nil
	}
	location := strings.ToLower(azurearm.Deref(oc.Location))
	// A name that cannot be rendered lists the cluster not ready under
	// its ARM name, never absent: a served cluster keeps its last
	// rendering, under its last name.
	name, nameErr := m.renderName(nameData{
		Name: rid.Name, ResourceGroup: rid.ResourceGroupName, Subscription: sub, Location: location, Tags: tags,
	}, out.id)
	if nameErr != nil {
		name = rid.Name
	}
	out.cluster = m.newCluster(name, sub, location, rid, oc, tags)
	if private {
		out.cluster.ProxyURL = m.cfg.PrivateEndpoints.ProxyURL
	}
	notReady := func(kind, reason string) (mapped, error) {
		out.cluster.Ready, out.cluster.NotReadyReason, out.notReadyKind = false, reason, kind
		return out, nil
	}
	if m.cfg.Auth == AuthAgent {
		return m.throughAgent(out, tags, l)
	}
	if nameErr != nil {
		return notReady(notReadyName, nameErr.Error())
	}
	srv, host, reason := apiServer(azurearm.Deref(api.URL))
	if reason != "" {
		return notReady(notReadyServer, reason)
	}
	out.cluster.Server = srv
	if reason := m.sel.Scope(&out.cluster, tags); reason != "" {
		return notReady(notReadyScope, reason)
	}
	ca, reason := l.trust.forHost(host)
	if reason != "" {
		return notReady(notReadyCA, reason)
	}
	out.cluster.CA = ca
	ref, err := sources.BoundToken(l.bindings, out.cluster.ID)
	if err != nil {
		return notReady(notReadyToken, err.Error())
	}
	out.cluster.Auth = sources.Auth{Kind: sources.AuthBearerToken, TokenRef: ref}
	return out, nil
}

// throughAgent serves out through the agent its Secret binds it to (see
// sources.AgentIndex.Join): under the agent's name and server, whatever
// the name template renders and whatever apiserverProfile says (Argo CD
// never calls the cluster's API server). Without an agent it is listed
// not ready under its rendered name.
func (m *mapper) throughAgent(out mapped, tags map[string]string, l *listing) (mapped, error) {
	c := &out.cluster
	reason, kind := m.sel.Scope(c, tags), notReadyScope
	if reason == "" {
		claim, _ := azurearm.TagValue(tags, m.cfg.Agent.Tag)
		agent, err := l.agents.Join(out.id, strings.TrimSpace(claim), m.cfg.Agent.Tag)
		if err == nil {
			c.ServeThroughAgent(agent)
			return out, nil
		}
		reason, kind = err.Error(), notReadyAgent
	}
	c.Ready, c.NotReadyReason, out.notReadyKind = false, reason, kind
	return out, nil
}

// apiServer returns the server of apiserverProfile.url (e.g.
// https://api.<domain>:6443/ becomes https://api.<domain>:6443, the form
// Argo CD stores) and its host, lower-cased, or why there is none.
func apiServer(apiURL string) (server, host, reason string) {
	if apiURL == "" {
		return "", "", "the cluster reports no API server URL (apiserverProfile.url)"
	}
	srv, err := sources.NormalizeServer(apiURL)
	if err != nil {
		return "", "", "apiserverProfile.url: " + err.Error()
	}
	u, err := url.Parse(srv)
	if err != nil || u.Scheme != "https" {
		return "", "", "apiserverProfile.url is not an https URL"
	}
	return srv, strings.TrimSuffix(strings.ToLower(u.Hostname()), "."), ""
}

// clusterID parses the resource id of a cluster listed in subscription
// sub; an error means a malformed response.
func clusterID(sub string, oc *armredhatopenshift.OpenShiftCluster) (*arm.ResourceID, error) {
	var id *string
	if oc != nil {
		id = oc.ID
	}
	return azurearm.ClusterID(sub, id, openShiftClusterType, "an OpenShift cluster")
}

// filter returns why the configured filters leave a cluster out; "" keeps
// it.
func (m *mapper) filter(rg string, tags map[string]string, private bool) (skipReason, string) {
	if skip, detail := m.sel.Skip(rg, tags); skip != "" {
		return skip, detail
	}
	if private && m.cfg.PrivateEndpoints.Policy == PrivateExclude {
		return skipPrivate, "private API server"
	}
	return "", ""
}

// newCluster is the model of a cluster the filters kept, without its
// server, scope, CA and token; it is not ready until they are set.
func (m *mapper) newCluster(name, sub, location string, rid *arm.ResourceID, oc *armredhatopenshift.OpenShiftCluster,
	tags map[string]string) sources.Cluster {
	p := oc.Properties
	var version, console, visibility string
	if p.ClusterProfile != nil {
		version = azurearm.Deref(p.ClusterProfile.Version)
	}
	if p.ConsoleProfile != nil {
		console = strings.TrimRight(azurearm.Deref(p.ConsoleProfile.URL), "/")
	}
	if p.ApiserverProfile != nil {
		visibility = string(azurearm.Deref(p.ApiserverProfile.Visibility))
	}
	c := sources.Cluster{
		Provider:    sources.ProviderARO,
		Name:        name,
		ID:          strings.ToLower(*oc.ID),
		Labels:      m.sel.Labels(tags, rid.Name),
		Annotations: map[string]string{AnnotationResourceID: *oc.ID},
		Region:      location,
		Account:     sub,
		Group:       rid.ResourceGroupName,
		State:       string(azurearm.Deref(p.ProvisioningState)),
		Phase:       phaseOf(string(azurearm.Deref(p.ProvisioningState)), p.ApiserverProfile != nil && azurearm.Deref(p.ApiserverProfile.URL) != ""),
		Ready:       true,
	}
	for _, l := range []struct{ key, value string }{
		{LabelResourceGroup, rid.ResourceGroupName}, {OpenShiftVersion, version}, {LabelAPIVisibility, visibility},
	} {
		if v, ok := azurearm.SanitizeLabelValue(l.value); ok && v != "" {
			c.Labels[l.key] = v
		}
	}
	if version != "" {
		c.Annotations[OpenShiftVersion] = version
	}
	if console != "" {
		c.Annotations[AnnotationConsoleURL] = console
	}
	return c
}

// renderName renders NamePrefix and NameTemplate and makes the result a
// DNS label (dnsLabel); id is the cluster's lower-cased resource id.
func (m *mapper) renderName(d nameData, id string) (string, error) {
	var b bytes.Buffer
	if err := m.name.Execute(&b, d); err != nil {
		return "", fmt.Errorf("nameTemplate: %w", err)
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("nameTemplate rendered an empty name")
	}
	name := dnsLabel(m.cfg.NamePrefix+b.String(), id)
	if name == "" {
		return "", fmt.Errorf("name %q has no letter or digit to make a DNS label of", azurearm.FirstLine(m.cfg.NamePrefix+b.String()))
	}
	return name, nil
}

// nonLabel matches what a DNS label cannot hold once lower-cased.
var nonLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// maxLabel is the length of a DNS label.
const maxLabel = 63

// dnsLabel makes s an RFC 1123 DNS label, as an Argo CD agent name must
// be and as every Kubernetes object name can be: lower case, every run of
// other characters than letters, digits and '-' replaced by one '-', '-'
// trimmed from the ends. An ARM name may be 90 characters: a longer
// result is cut and ends with '-' and 8 hex digits of the SHA-256 of id,
// so that two long names with one beginning stay apart. Empty when s has
// no letter or digit.
func dnsLabel(s, id string) string {
	s = strings.Trim(nonLabel.ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) <= maxLabel {
		return s
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	return strings.TrimRight(s[:maxLabel-len(suffix)], "-") + suffix
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
