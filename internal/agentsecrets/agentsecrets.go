// Package agentsecrets reads the agents' cluster Secrets of Argo CD's
// namespace (sources.Agents): the Secrets labelled
// argocd.argoproj.io/secret-type=cluster and sources.LabelAgentName that
// argocd-agent writes on the hub, one LIST per call.
//
// It reads those Secrets in full, data included, because the cluster's
// name and server are their data.name and data.server. Of each Secret it
// keeps only the fields of sources.AgentSecret: the rest, and above all
// data.config, which holds the resource proxy's TLS keys or bearer token,
// is dropped as soon as they are extracted, and is never returned, logged
// or put in an error.
package agentsecrets

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// selector selects the agents' cluster Secrets: Argo CD's cluster Secrets
// that name an agent.
const selector = "argocd.argoproj.io/secret-type=cluster," + sources.LabelAgentName

// Lister implements sources.Agents on the Kubernetes API. Its client is
// made on the first call, so that a configuration without agents never
// needs the API.
type Lister struct {
	namespace string
	config    func() (*rest.Config, error)
	pageSize  int64

	once   sync.Once
	client kubeclient.Interface
	err    error
}

var _ sources.Agents = (*Lister)(nil)

// New returns the agents' Secrets of namespace, read through the API
// server that config returns when first needed.
func New(config func() (*rest.Config, error), namespace string) *Lister {
	return &Lister{namespace: namespace, config: config, pageSize: 500}
}

func (l *Lister) clientset() (kubeclient.Interface, error) {
	l.once.Do(func() {
		var c *rest.Config
		if c, l.err = l.config(); l.err != nil {
			return
		}
		l.client, l.err = kubeclient.NewForConfig(c)
	})
	return l.client, l.err
}

// Agents lists the agents' cluster Secrets of the namespace and returns
// what sources.AgentSecret holds of each, sorted by agent then Secret.
func (l *Lister) Agents(ctx context.Context) ([]sources.AgentSecret, error) {
	c, err := l.clientset()
	if err != nil {
		return nil, fmt.Errorf("agent secrets: %w", err)
	}
	var out []sources.AgentSecret
	opts := metav1.ListOptions{LabelSelector: selector, Limit: l.pageSize}
	for {
		list, err := c.CoreV1().Secrets(l.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("agent secrets: list secrets in %s: %w", l.namespace, err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			skip, _ := strconv.ParseBool(s.Annotations[sources.AnnotationSkipReconcile])
			out = append(out, sources.AgentSecret{
				Agent:         s.Labels[sources.LabelAgentName],
				Secret:        s.Name,
				Name:          string(s.Data["name"]),
				Server:        string(s.Data["server"]),
				ClusterID:     strings.ToLower(strings.TrimSpace(s.Annotations[sources.AnnotationTokenBinding])),
				SkipReconcile: skip,
			})
		}
		// list, and the Secrets' config with it, is dropped here.
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	slices.SortFunc(out, func(a, b sources.AgentSecret) int {
		return cmp.Or(cmp.Compare(a.Agent, b.Agent), cmp.Compare(a.Secret, b.Secret))
	})
	return out, nil
}
