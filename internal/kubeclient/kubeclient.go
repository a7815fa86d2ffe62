// Package kubeclient holds the typed Kubernetes clients the service uses
// (the core, coordination and authentication groups of client-go's
// clientset) and informers built on them, without the rest of the
// clientset: client-go's full clientset and its informer factory link the
// client, the lister and the informer of every API group into the binary
// (61 MB; 50 MB without them), and every replica maps the pages they
// bring (a follower at 10,000 clusters: ~4 MiB).
package kubeclient

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	authenticationv1 "k8s.io/client-go/kubernetes/typed/authentication/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the part of client-go's kubernetes.Interface the service
// uses; a kubernetes.Clientset (or its fake) is one.
type Interface interface {
	CoreV1() corev1.CoreV1Interface
	CoordinationV1() coordinationv1.CoordinationV1Interface
	AuthenticationV1() authenticationv1.AuthenticationV1Interface
}

type clients struct {
	core  *corev1.CoreV1Client
	coord *coordinationv1.CoordinationV1Client
	authn *authenticationv1.AuthenticationV1Client
}

func (c *clients) CoreV1() corev1.CoreV1Interface                               { return c.core }
func (c *clients) CoordinationV1() coordinationv1.CoordinationV1Interface       { return c.coord }
func (c *clients) AuthenticationV1() authenticationv1.AuthenticationV1Interface { return c.authn }

// NewForConfig returns the clients of c. They share one HTTP client (and
// so one connection pool) and c's rate limiter, as a clientset's do.
func NewForConfig(c *rest.Config) (Interface, error) {
	cfg := *c
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	httpClient, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("http client: %w", err)
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("burst must be above 0 when qps is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	out := &clients{}
	if out.core, err = corev1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("core client: %w", err)
	}
	if out.coord, err = coordinationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("coordination client: %w", err)
	}
	if out.authn, err = authenticationv1.NewForConfigAndClient(&cfg, httpClient); err != nil {
		return nil, fmt.Errorf("authentication client: %w", err)
	}
	return out, nil
}

// Informer is a shared informer that starts and shuts down as an informer
// factory of client-go does: Start runs it, once, until stop closes;
// Shutdown waits for it to have stopped. An Informer made around any
// shared informer (&Informer{SharedIndexInformer: inf}) is ready to use.
type Informer struct {
	cache.SharedIndexInformer
	once sync.Once
	wg   sync.WaitGroup
}

// Start runs the informer until stop closes; it does nothing once called.
func (i *Informer) Start(stop <-chan struct{}) {
	i.once.Do(func() {
		i.wg.Add(1)
		go func() {
			defer i.wg.Done()
			i.Run(stop)
		}()
	})
}

// Shutdown waits for a started informer to stop (its stop channel closed).
func (i *Informer) Shutdown() { i.wg.Wait() }

// Lister lists and watches one kind of object with the given list options.
type Lister[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// NewInformer returns the informer of the objects of example's type that
// c lists and watches, with tweak applied to the list options (nil: none)
// and transform to each object before it is stored (nil: none), no
// periodic resync and no index: what client-go's informer factory makes of
// the same options, without the namespace index it adds (one key per object
// in a set per namespace; an informer of one namespace is read whole). It
// streams its lists as the factory's do, unless c says it cannot
// (IsWatchListSemanticsUnSupported; client-go's fake Clientset says so,
// the typed clients it hands out do not).
func NewInformer[L runtime.Object](c Lister[L], example runtime.Object, tweak func(*metav1.ListOptions), transform cache.TransformFunc) *Informer {
	opts := func(o metav1.ListOptions) metav1.ListOptions {
		if tweak != nil {
			tweak(&o)
		}
		return o
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return c.List(ctx, opts(o))
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, opts(o))
		},
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, c), example, 0, cache.Indexers{})
	if transform != nil {
		_ = inf.SetTransform(transform) // not started: cannot fail
	}
	return &Informer{SharedIndexInformer: inf}
}
