package sources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Agent clusters: clusters that Argo CD reaches through the Argo CD agent
// (argoproj-labs/argocd-agent, pull model). The agent's tooling
// (argocd-agentctl agent create, or the principal's self-registration)
// writes the hub's cluster Secret, named cluster-<agent>, whose server is
// the principal's resource proxy with ?agentName=<agent>. The service
// never writes, patches or deletes such a Secret: it reads the agent's
// name and server from it and serves the cluster under them.
//
// What joins a discovered cluster to an agent is decided on the hub, never
// by the cluster's owner alone: the agent's Secret must be annotated
// AnnotationTokenBinding with the cluster's identity (its ARM resource id
// for ARO), as a token Secret is. The owner's tag (DefaultAgentTag) may
// only narrow: when set, it must name that very agent.
const (
	// LabelAgentName is the label of an agent's cluster Secret naming the
	// agent (argocd-agent's LabelKeyClusterAgentMapping); the principal
	// admits only cluster Secrets that carry it.
	LabelAgentName = "argocd-agent.argoproj-labs.io/agent-name"
	// LabelAgentSelfRegistered marks a Secret the principal wrote when the
	// agent registered itself.
	LabelAgentSelfRegistered = "argocd-agent.argoproj-labs.io/self-registered-cluster"
	// AnnotationAgentManagedBy is the annotation (value AgentManager) that
	// argocd-agent puts on the Secrets it writes.
	AnnotationAgentManagedBy = "managed-by"
	// AgentManager is the value of AnnotationAgentManagedBy.
	AgentManager = "argocd-agent"
	// AnnotationSkipReconcile tells Argo CD's application controller (from
	// v3.4.0) not to reconcile Applications of the cluster: an agent's
	// Secret must carry it on a hub that also has push clusters.
	AnnotationSkipReconcile = "argocd.argoproj.io/skip-reconcile"
	// DefaultAgentTag is the tag or label by which a cluster's owner says
	// which agent runs in it.
	DefaultAgentTag = "argocd-agent-name"
	// AgentSecretPrefix is the prefix of an agent's Secret name.
	AgentSecretPrefix = "cluster-"
)

// IsAgentSecret reports whether a Secret with these labels and annotations
// is an agent's: it has an owner already, whatever else it carries.
func IsAgentSecret(labels, annotations map[string]string) bool {
	return labels[LabelAgentName] != "" || labels[LabelAgentSelfRegistered] != "" ||
		annotations[AnnotationAgentManagedBy] == AgentManager
}

// AgentAuth says that Argo CD reaches a cluster through an agent, and by
// which Secret: the service writes no Secret for it.
type AgentAuth struct {
	// Name is the agent's name, the Argo CD cluster name.
	Name string `json:"name"`
	// Secret is the name of the agent's cluster Secret.
	Secret string `json:"secret"`
}

// AgentSecret is what the service reads of an agent's cluster Secret:
// never its config, which holds the resource proxy's credentials.
type AgentSecret struct {
	// Agent is the value of LabelAgentName.
	Agent string
	// Secret is the Secret's name.
	Secret string
	// Name and Server are its data.name and data.server, verbatim.
	Name, Server string
	// ClusterID is its AnnotationTokenBinding, lower case: the cluster the
	// hub binds the agent to.
	ClusterID string
	// SkipReconcile is its AnnotationSkipReconcile read as a bool.
	SkipReconcile bool
}

// Agents reads the agents' cluster Secrets of Argo CD's namespace.
type Agents interface {
	// Agents returns every Secret labelled LabelAgentName. An error means
	// the agents are unknown: the listing that needs them fails.
	Agents(ctx context.Context) ([]AgentSecret, error)
}

// AgentIndex indexes the agents' Secrets by agent and by the cluster each
// is bound to.
type AgentIndex struct {
	byAgent, byCluster map[string][]AgentSecret
}

// IndexAgents indexes secrets.
func IndexAgents(secrets []AgentSecret) AgentIndex {
	x := AgentIndex{byAgent: map[string][]AgentSecret{}, byCluster: map[string][]AgentSecret{}}
	for _, s := range secrets {
		x.byAgent[s.Agent] = append(x.byAgent[s.Agent], s)
		if s.ClusterID != "" {
			x.byCluster[s.ClusterID] = append(x.byCluster[s.ClusterID], s)
		}
	}
	return x
}

// ErrAgentNotRegistered is the reason of a cluster with no agent Secret.
var ErrAgentNotRegistered = errors.New("agent not registered")

// Join returns the agent Secret of the cluster whose identity is id, or
// why it has none. claim is the agent its owner's tag names ("" when
// untagged). The agent's Secret must be bound to the cluster (annotated
// AnnotationTokenBinding=id); a tag alone never joins, and a tag naming
// another agent than the bound one refuses the join.
func (x AgentIndex) Join(id, claim, tag string) (AgentSecret, error) {
	id = strings.ToLower(id)
	bind := fmt.Sprintf("annotate the agent's Secret %s=%s", AnnotationTokenBinding, id)
	bound := x.byCluster[id]
	var s AgentSecret
	switch {
	case claim != "":
		if errs := validation.IsDNS1123Label(claim); len(errs) > 0 {
			return AgentSecret{}, fmt.Errorf("tag %s names agent %q, which is not a DNS label: %s", tag, claim, errs[0])
		}
		secrets := x.byAgent[claim]
		if len(secrets) == 0 {
			return AgentSecret{}, fmt.Errorf("%w: tag %s names agent %q, and no Secret is labelled %s=%s",
				ErrAgentNotRegistered, tag, claim, LabelAgentName, claim)
		}
		if s = secrets[0]; len(secrets) == 1 && s.ClusterID != id {
			if s.ClusterID != "" {
				return AgentSecret{}, fmt.Errorf("agent %q is bound to another cluster by its Secret %s: the tag %s alone never joins", claim, s.Secret, tag)
			}
			return AgentSecret{}, fmt.Errorf("agent %q is registered but not bound to this cluster: %s", claim, bind)
		}
	case len(bound) == 0:
		return AgentSecret{}, fmt.Errorf("%w: no agent Secret is bound to this cluster (%s)", ErrAgentNotRegistered, bind)
	default:
		s = bound[0]
	}
	if len(bound) > 1 {
		names := make([]string, len(bound))
		for i, b := range bound {
			names[i] = b.Secret
		}
		return AgentSecret{}, fmt.Errorf("%d agent Secrets are bound to this cluster (%s): keep one", len(bound), strings.Join(slices.Sorted(slices.Values(names)), ", "))
	}
	if n := len(x.byAgent[s.Agent]); n > 1 {
		return AgentSecret{}, fmt.Errorf("agent %q has %d Secrets: its principal maps one only", s.Agent, n)
	}
	return s, checkAgentSecret(s)
}

// checkAgentSecret checks what serving the cluster through s needs.
func checkAgentSecret(s AgentSecret) error {
	if errs := validation.IsDNS1123Label(s.Agent); len(errs) > 0 {
		return fmt.Errorf("agent %q of Secret %s is not a DNS label: the resource proxy refuses it", s.Agent, s.Secret)
	}
	if s.Name != s.Agent {
		return fmt.Errorf("agent Secret %s names the cluster %q, not its agent %q: Applications find an agent by its cluster name", s.Secret, s.Name, s.Agent)
	}
	if _, err := AgentServer(s.Server); err != nil {
		return fmt.Errorf("agent Secret %s: %w", s.Secret, err)
	}
	if !s.SkipReconcile {
		return fmt.Errorf("agent Secret %s lacks %s=true: the hub's application controller would reconcile the agent's Applications too",
			s.Secret, AnnotationSkipReconcile)
	}
	return nil
}

// AgentServer checks the server of an agent's Secret, the principal's
// resource proxy (https://<address>?agentName=<agent>), and returns it
// verbatim: its query is part of its identity, and Argo CD compares
// servers as strings.
func AgentServer(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", errors.New("invalid agent server url")
	}
	switch {
	case u.User != nil:
		return "", errors.New("agent server url must not carry user info")
	case u.Scheme != "https" && u.Scheme != "http":
		return "", errors.New("agent server url scheme must be https or http")
	case u.Hostname() == "" || u.Opaque != "":
		return "", errors.New("agent server url has no host")
	case strings.Contains(s, "#"):
		return "", errors.New("agent server url must not have a fragment")
	case strings.ContainsFunc(s, unicode.IsSpace):
		return "", errors.New("agent server url must not contain whitespace")
	}
	return s, nil
}

// ValidServer checks c's server: verbatim for an agent cluster (see
// AgentServer), else NormalizeServer's form.
func (c *Cluster) ValidServer() (string, error) {
	if c.Auth.Kind == AuthAgent {
		return AgentServer(c.Server)
	}
	return NormalizeServer(c.Server)
}

// ServeThroughAgent makes c the cluster that agent s reaches: its name is
// the agent's, its server the agent Secret's, it carries no credentials of
// its own (the agent's Secret has them), and it is labelled LabelAgentName
// as the agent's Secret is, so that the selectors written for Argo CD's
// cluster generator select it too. c's labels are copied, not modified.
func (c *Cluster) ServeThroughAgent(s AgentSecret) {
	c.Name, c.Server, c.CA, c.ProxyURL = s.Agent, s.Server, CA{}, ""
	c.Auth = Auth{Kind: AuthAgent, Agent: &AgentAuth{Name: s.Agent, Secret: s.Secret}}
	c.Labels = maps.Clone(c.Labels)
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	c.Labels[LabelAgentName] = s.Agent
}

// AgentLabelPrefix is the prefix of argocd-agent's labels.
const AgentLabelPrefix = "argocd-agent.argoproj-labs.io/"

// DropAgentLabels removes from c's labels and annotations the marks of an
// agent's Secret that c's owner may have written (a Rancher label), unless
// c is served through that agent: the service alone says which cluster is
// an agent's. The maps are copied when something is removed.
func (c *Cluster) DropAgentLabels() {
	keep := func(k, v string) bool {
		return c.Auth.Kind == AuthAgent && c.Auth.Agent != nil && k == LabelAgentName && v == c.Auth.Agent.Name
	}
	drop := func(m map[string]string, marked func(k, v string) bool) map[string]string {
		for k, v := range m {
			if marked(k, v) {
				m = maps.Clone(m)
				maps.DeleteFunc(m, marked)
				return m
			}
		}
		return m
	}
	c.Labels = drop(c.Labels, func(k, v string) bool { return strings.HasPrefix(k, AgentLabelPrefix) && !keep(k, v) })
	c.Annotations = drop(c.Annotations, func(k, v string) bool {
		return strings.HasPrefix(k, AgentLabelPrefix) || k == AnnotationAgentManagedBy && v == AgentManager
	})
}
