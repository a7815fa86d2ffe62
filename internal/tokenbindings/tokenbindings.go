// Package tokenbindings finds the token Secrets that operators bind to
// clusters in Argo CD's namespace (sources.TokenBindings): Secrets labelled
// sources.LabelTokenBinding with a provider's name and annotated
// sources.AnnotationTokenBinding with a cluster's identity. It reads their
// metadata only, one LIST per call; the token itself is read by the
// cluster Secret writer when it writes.
package tokenbindings

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Lister implements sources.TokenBindings on the Kubernetes API. Its
// client is made on the first call, so that a configuration without a
// source that binds tokens never needs the API.
type Lister struct {
	namespace string
	config    func() (*rest.Config, error)
	pageSize  int64

	once   sync.Once
	client metadata.Interface
	err    error
}

var _ sources.TokenBindings = (*Lister)(nil)

// New returns the bindings of namespace, read through the API server that
// config returns when first needed.
func New(config func() (*rest.Config, error), namespace string) *Lister {
	return &Lister{namespace: namespace, config: config, pageSize: 500}
}

func (l *Lister) metadata() (metadata.Interface, error) {
	l.once.Do(func() {
		var c *rest.Config
		if c, l.err = l.config(); l.err != nil {
			return
		}
		l.client, l.err = metadata.NewForConfig(c)
	})
	return l.client, l.err
}

// Bound lists the Secrets of the namespace bound to provider's clusters and
// returns their names by cluster identity (lower case), sorted. A Secret
// without the annotation binds nothing.
func (l *Lister) Bound(ctx context.Context, provider sources.Provider) (map[string][]string, error) {
	c, err := l.metadata()
	if err != nil {
		return nil, fmt.Errorf("token bindings: %w", err)
	}
	sel := labels.SelectorFromSet(labels.Set{sources.LabelTokenBinding: string(provider)}).String()
	out := map[string][]string{}
	opts := metav1.ListOptions{LabelSelector: sel, Limit: l.pageSize}
	for {
		list, err := c.Resource(secrets).Namespace(l.namespace).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("token bindings: list secrets in %s: %w", l.namespace, err)
		}
		for _, s := range list.Items {
			id := strings.ToLower(strings.TrimSpace(s.Annotations[sources.AnnotationTokenBinding]))
			if id != "" {
				out[id] = append(out[id], s.Name)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out, nil
}
