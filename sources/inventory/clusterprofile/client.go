package clusterprofile

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

// The ledger's clients.

// New returns the ledger of opts on the API server of cfg. Its clients
// share one rate limiter, cfg's (or one of cfg's QPS and Burst).
func New(cfg *rest.Config, opts Options) (*Ledger, error) {
	if err := opts.validate(); err != nil {
		return nil, fmt.Errorf("clusterprofile ledger: %w", err)
	}
	c := rest.CopyConfig(cfg)
	if c.RateLimiter == nil {
		qps, burst := c.QPS, c.Burst
		if qps == 0 {
			qps, burst = rest.DefaultQPS, rest.DefaultBurst
		}
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	}
	l := &Ledger{opts: opts, now: time.Now}
	var err error
	if l.core, err = kubeclient.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("clusterprofile ledger: %w", err)
	}
	if l.dyn, err = dynamic.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("clusterprofile ledger: %w", err)
	}
	if l.meta, err = metadata.NewForConfig(c); err != nil {
		return nil, fmt.Errorf("clusterprofile ledger: %w", err)
	}
	gv := Resource.GroupVersion()
	c.GroupVersion, c.APIPath = &gv, "/apis"
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON // custom resources have no protobuf
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if l.raw, err = rest.RESTClientFor(c); err != nil {
		return nil, fmt.Errorf("clusterprofile ledger: %w", err)
	}
	return l, nil
}

// selector selects this installation's ClusterProfiles.
func (l *Ledger) selector() string {
	return labels.SelectorFromSet(labels.Set{LabelManager: Manager, LabelOwner: l.opts.OwnerID}).String()
}

func (l *Ledger) profiles() dynamic.ResourceInterface {
	return l.dyn.Resource(Resource).Namespace(l.opts.Namespace)
}

// write sends one write of a ClusterProfile (subresource "" or "status")
// with our field manager, and reads nothing of the answer but its status.
// The lease is checked right before it (a put may send a create, a read
// and an apply).
func (l *Ledger) write(ctx context.Context, req *rest.Request, subresource string, body []byte) error {
	if err := lease.Check(ctx); err != nil {
		return err
	}
	return req.Namespace(l.opts.Namespace).Resource(Resource.Resource).SubResource(subresource).
		Param("fieldManager", Manager).Body(body).Do(ctx).Error()
}

// apply server-side applies body to the object name (or its status) with
// force: the ledger's fields are the leader's alone.
func (l *Ledger) apply(ctx context.Context, name, subresource string, body []byte) error {
	return l.write(ctx, l.raw.Patch(types.ApplyPatchType).Name(name).Param("force", "true"), subresource, body)
}
