package eks

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"text/template"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/arn"
	"github.com/aws/aws-sdk-go-v2/service/eks/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/upstream"
)

// Labels and annotations this source sets. Tags cannot write keys with
// this prefix.
const (
	reservedPrefix = "eks.argocd-cluster-discovery.io/"
	// LabelPrivateEndpoint is "true" on clusters without a public endpoint.
	LabelPrivateEndpoint = reservedPrefix + "private-endpoint"
	// AnnotationARN holds the cluster ARN.
	AnnotationARN = reservedPrefix + "arn"
	// ExecAPIVersion is the client.authentication API of the exec form.
	ExecAPIVersion = "client.authentication.k8s.io/v1beta1"
)

// mapper turns described EKS clusters into model clusters. It holds only
// validated configuration and does no I/O.
type mapper struct {
	allow, deny   []string
	tenantTag     string
	projectTag    string
	namespacesTag string
	roleTag       string
	rolePatterns  []string
	auth          AuthConfig
	private       PrivateEndpoints
	name          *template.Template
}

func newMapper(c Config) (*mapper, error) {
	tmpl, err := parseNameTemplate(c.NameTemplate)
	if err != nil {
		return nil, fmt.Errorf("nameTemplate: %w", err)
	}
	return &mapper{
		allow: c.Tags.Allow, deny: c.Tags.Deny,
		tenantTag: c.TenantTag, projectTag: c.ProjectTag, namespacesTag: c.NamespacesTag,
		roleTag: c.RoleTag, rolePatterns: c.RolePattern,
		auth: c.Auth, private: c.PrivateEndpoints, name: tmpl,
	}, nil
}

// mapped is the outcome of mapping one cluster.
type mapped struct {
	Cluster sources.Cluster
	// Skip is the reason the cluster is left out of the listing (the
	// clusters_skipped label); empty when it is listed.
	Skip string
	// Dropped says which tags did not become labels and why, for a debug
	// log.
	Dropped []string
}

// phase maps an EKS cluster status to the lifecycle phase (the table and
// its sources are in the package doc). hasEndpoint tells a FAILED cluster
// that has an API endpoint (degraded) from one whose creation failed before
// it got one (pending). A status this code does not know is degraded, never
// absence.
func phase(status types.ClusterStatus, hasEndpoint bool) sources.Phase {
	switch status {
	case types.ClusterStatusCreating, types.ClusterStatusPending:
		return sources.PhasePending
	case types.ClusterStatusActive:
		return sources.PhaseReady
	case types.ClusterStatusUpdating:
		return sources.PhaseDegraded
	case types.ClusterStatusFailed:
		if hasEndpoint {
			return sources.PhaseDegraded
		}
		return sources.PhasePending
	case types.ClusterStatusDeleting:
		return sources.PhaseLeaving
	}
	return sources.PhaseDegraded
}

// reasonPrivateEndpoint is the reason (the clusters_skipped label) of a
// cluster that privateEndpoints policy exclude leaves out.
const reasonPrivateEndpoint = "private_endpoint"

// toCluster maps a described cluster of account in region, with tags (from
// the tagging API: the describe answer's own tags are not read). Every
// status is listed; only the private endpoint policy leaves clusters out.
// An error means the answer cannot be trusted (it belongs to another
// account) or the name cannot be made.
func (m *mapper) toCluster(c *types.Cluster, tags map[string]string, account Account, region string) (mapped, error) {
	eksName := aws.ToString(c.Name)
	if a, err := arn.Parse(aws.ToString(c.Arn)); err == nil && a.AccountID != account.ID {
		return mapped{}, fmt.Errorf("cluster %s belongs to account %s: the credentials used are not account %s's", eksName, a.AccountID, account.ID)
	}
	private := c.ResourcesVpcConfig != nil && !c.ResourcesVpcConfig.EndpointPublicAccess
	if private && m.private.Policy == PrivateExclude {
		return mapped{Skip: reasonPrivateEndpoint}, nil
	}
	name, err := m.clusterName(eksName, account.ID, region)
	if err != nil {
		return mapped{}, fmt.Errorf("cluster %s: %w", eksName, err)
	}
	role, roleRefused := m.argocdRole(tags, account, region)
	out := mapped{Cluster: sources.Cluster{
		Provider:          sources.ProviderEKS,
		Name:              name,
		ID:                aws.ToString(c.Arn),
		CloudID:           sources.EKSCloudID(account.ID, region, eksName),
		Account:           account.ID,
		Region:            region,
		KubernetesVersion: aws.ToString(c.Version),
		State:             string(c.Status),
		Phase:             phase(c.Status, aws.ToString(c.Endpoint) != ""),
		Ready:             true,
		Auth:              m.authFor(eksName, role, region),
		Tenant:            tags[m.tenantTag],
		Project:           tags[m.projectTag],
		TenantFromOwner:   tags[m.tenantTag] != "",
		ProjectFromOwner:  tags[m.projectTag] != "",
	}}
	cl := &out.Cluster
	if a := aws.ToString(c.Arn); a != "" {
		cl.Annotations = map[string]string{AnnotationARN: a}
	}
	cl.Labels, out.Dropped = m.labels(tags)
	if private {
		cl.Labels[LabelPrivateEndpoint] = "true"
		if m.private.Policy == PrivateProxy {
			cl.ProxyURL = m.private.ProxyURL
		}
	}
	if len(cl.Labels) == 0 {
		cl.Labels = nil
	}
	if roleRefused != "" {
		// First: the one reason that needs someone to act.
		cl.Ready, cl.NotReadyReason = false, roleRefused
	}
	m.setAccess(cl, c, tags)
	return out, nil
}

// clusterName renders the name template.
func (m *mapper) clusterName(eksName, account, region string) (string, error) {
	var name strings.Builder
	if err := m.name.Execute(&name, nameData{Name: eksName, Account: account, Region: region}); err != nil {
		return "", fmt.Errorf("name template: %w", err)
	}
	if strings.TrimSpace(name.String()) == "" {
		return "", fmt.Errorf("name template renders an empty name")
	}
	return name.String(), nil
}

// The reasons of clusters_not_ready: a fixed set, where a cluster's
// NotReadyReason is free text.
const (
	notReadyEndpoint   = "no_endpoint"
	notReadyServer     = "invalid_server"
	notReadyCA         = "no_ca"
	notReadyCAInvalid  = "invalid_ca"
	notReadyNamespaces = "invalid_scope"
	notReadyRole       = "invalid_role"
)

// notReadyCounts counts the listed clusters that cannot be rendered, by
// the fixed reason behind their NotReadyReason.
func notReadyCounts(cs []sources.Cluster) map[string]int {
	return upstream.CountNotReady(cs, []upstream.ReasonPrefix{
		{Prefix: "EKS reports no endpoint", Reason: notReadyEndpoint},
		{Prefix: "invalid endpoint", Reason: notReadyServer},
		{Prefix: "EKS reports no certificate authority", Reason: notReadyCA},
		{Prefix: "invalid certificate authority", Reason: notReadyCAInvalid},
		{Prefix: reasonRoleTag, Reason: notReadyRole},
	}, notReadyNamespaces)
}

// setAccess sets what Argo CD needs to reach the cluster (server, CA,
// namespaces) and, when one of them is missing or invalid, marks the
// cluster not ready with the first reason.
func (m *mapper) setAccess(cl *sources.Cluster, c *types.Cluster, tags map[string]string) {
	notReady := func(reason string) {
		if cl.Ready {
			cl.Ready, cl.NotReadyReason = false, reason
		}
	}
	endpoint := aws.ToString(c.Endpoint)
	cl.Server = endpoint
	if endpoint == "" {
		notReady(fmt.Sprintf("EKS reports no endpoint yet (status %s)", c.Status))
	} else if srv, err := sources.NormalizeServer(endpoint); err != nil {
		notReady("invalid endpoint: " + err.Error())
	} else {
		cl.Server = srv
	}
	caData := ""
	if c.CertificateAuthority != nil {
		caData = aws.ToString(c.CertificateAuthority.Data)
	}
	if caData == "" {
		notReady(fmt.Sprintf("EKS reports no certificate authority yet (status %s)", c.Status))
	} else if ca, err := sources.ParseCAData(caData); err != nil {
		notReady("invalid certificate authority data: " + err.Error())
	} else {
		cl.CA = ca
	}
	if v, ok := tags[m.namespacesTag]; ok {
		ns, err := sources.ParseNamespaces(v)
		if err != nil {
			// Namespaces left empty would mean every namespace: never widen.
			notReady(fmt.Sprintf("tag %s: %v", m.namespacesTag, err))
		}
		cl.Namespaces = ns
	}
	if p := cl.Project; p != "" && len(validation.IsDNS1123Subdomain(p)) > 0 {
		// as the AKS source: a value that cannot name an AppProject never
		// reaches a Secret
		notReady(fmt.Sprintf("tag %s is not a valid AppProject name", m.projectTag))
	}
}

// authFor is how Argo CD reaches a cluster: as role, or with its own
// identity when role is empty.
func (m *mapper) authFor(eksName, role, region string) sources.Auth {
	if m.auth.Mode == AuthModeExec {
		args := []string{"aws", "--cluster-name", eksName}
		if role != "" {
			args = append(args, "--role-arn", role)
		}
		return sources.Auth{Kind: sources.AuthExec, Exec: &sources.ExecProvider{
			Command: m.auth.Command, Args: args, Env: map[string]string{"AWS_REGION": region}, APIVersion: ExecAPIVersion,
		}}
	}
	return sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: eksName, RoleARN: role, Region: region}}
}

// labels turns the tags that pass the allow and deny lists into labels,
// sanitizing keys and values. Tags are taken in key order, so that when two
// keys sanitize to the same label the first one wins, always.
func (m *mapper) labels(tags map[string]string) (map[string]string, []string) {
	out := make(map[string]string, len(tags)+1)
	from := map[string]string{}
	var dropped []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if !m.tagAllowed(k) {
			continue
		}
		key, err := labelKey(k)
		if err == nil && strings.HasPrefix(key, reservedPrefix) {
			err = fmt.Errorf("prefix %s is reserved", reservedPrefix)
		}
		if err == nil && from[key] != "" {
			err = fmt.Errorf("label %s already comes from tag %q", key, from[key])
		}
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("tag %q: %v", k, err))
			continue
		}
		val, err := labelValue(tags[k])
		if err != nil {
			dropped = append(dropped, fmt.Sprintf("tag %q value: %v", k, err))
			continue
		}
		out[key], from[key] = val, k
	}
	return out, dropped
}

func (m *mapper) tagAllowed(k string) bool {
	match := func(patterns []string) bool {
		return slices.ContainsFunc(patterns, func(p string) bool { ok, _ := path.Match(p, k); return ok })
	}
	return (len(m.allow) == 0 || match(m.allow)) && !match(m.deny)
}

// labelKey makes a valid label key from an AWS tag key: the part before the
// first "/" becomes a lower-case DNS prefix, and characters a label cannot
// hold become "-".
func labelKey(tag string) (string, error) {
	prefix, name, hasPrefix := strings.Cut(tag, "/")
	if !hasPrefix {
		prefix, name = "", tag
	}
	prefix = strings.Trim(replaceInvalid(strings.ToLower(prefix), func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-'
	}), "-.")
	name = trimToAlnum(replaceInvalid(name, isLabelChar))
	key := name
	if prefix != "" {
		key = prefix + "/" + name
	}
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return "", fmt.Errorf("no valid label key: %s", errs[0])
	}
	return key, nil
}

// labelValue makes a valid label value: invalid characters become "-" and
// the ends are trimmed to letters or digits. Values too long are dropped
// rather than cut, so that two values never collide.
func labelValue(v string) (string, error) {
	v = trimToAlnum(replaceInvalid(v, isLabelChar))
	if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
		return "", fmt.Errorf("no valid label value: %s", errs[0])
	}
	return v, nil
}

func isLabelChar(r rune) bool {
	return r < unicode.MaxASCII && (isAlnum(r) || r == '-' || r == '_' || r == '.')
}

func isAlnum(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
}

func replaceInvalid(s string, ok func(rune) bool) string {
	return strings.Map(func(r rune) rune {
		if ok(r) {
			return r
		}
		return '-'
	}, s)
}

func trimToAlnum(s string) string {
	return strings.TrimFunc(s, func(r rune) bool { return !isAlnum(r) })
}

// nameData is what NameTemplate sees.
type nameData struct {
	Name, Account, Region string
}

// parseNameTemplate parses t and checks that it renders a non-empty name
// from sample data and only refers to known fields.
func parseNameTemplate(t string) (*template.Template, error) {
	tmpl, err := template.New("name").Option("missingkey=error").Parse(t)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	if err := tmpl.Execute(&b, nameData{Name: "payments-prod", Account: "123456789012", Region: "eu-west-1"}); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.String()) == "" {
		return nil, fmt.Errorf("renders an empty name")
	}
	return tmpl, nil
}
