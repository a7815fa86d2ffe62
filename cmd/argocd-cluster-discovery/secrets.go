package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/agentsecrets"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/tokenbindings"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// kubeConfig is the in-cluster configuration, or the kubeconfig named in
// the configuration or by $KUBECONFIG, with the client's rate limits from
// secrets.client (client-go's own defaults, 5 requests/s, would take half
// an hour to write 10,000 Secrets).
func kubeConfig(cfg config.Secrets) (*rest.Config, error) {
	c, err := kubeConfigAt(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	c.QPS, c.Burst = cfg.Client.QPS, cfg.Client.Burst
	c.UserAgent = "argocd-cluster-discovery/" + version
	// built-in objects (Secrets, Leases, ConfigMaps) in protobuf, as the
	// controllers of kube-controller-manager read them: at 10,000 Secrets
	// JSON costs both ends CPU a cold start needs. The dynamic and
	// metadata clients choose JSON for themselves.
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return c, nil
}

// tokenBindings finds the token Secrets operators bind to clusters in
// Argo CD's namespace, where the Secret writer reads them; its client is
// made when a source first asks, so a configuration with no such source
// never needs the Kubernetes API.
func tokenBindings(cfg *config.Config) *tokenbindings.Lister {
	return tokenbindings.New(func() (*rest.Config, error) { return kubeConfig(cfg.Secrets) }, cfg.Secrets.Namespace)
}

// agentSecrets reads the agents' cluster Secrets of Argo CD's namespace
// (auth agent); like tokenBindings, its client is made on first use.
func agentSecrets(cfg *config.Config) *agentsecrets.Lister {
	return agentsecrets.New(func() (*rest.Config, error) { return kubeConfig(cfg.Secrets) }, cfg.Secrets.Namespace)
}

func kubeConfigAt(path string) (*rest.Config, error) {
	if path == "" {
		path = os.Getenv("KUBECONFIG")
	}
	if path == "" {
		c, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster kubernetes config (set secrets.kubeconfig outside a cluster): %w", err)
		}
		return c, nil
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return c, nil
}

// kubeAPI is the Kubernetes API as the reconciler and the refresh trigger
// use it: one client, one shared informer of the cluster Secrets of Argo
// CD's namespace for both (clustersecret.NewInformer), and the
// trigger's informers of ApplicationSets. The client is made on first use;
// the informers start when this process first leads (startCaches), not
// before: a follower answers from the ledger and never reads them, and at
// 10,000 clusters the Secrets alone would cost it megabytes. A new leader
// lists them once (seconds at 10,000, before its first pass); from then on
// they run for as long as the process does, so a lease lost and won again
// finds them warm.
type kubeAPI struct {
	cfg *config.Config

	once    sync.Once
	err     error
	rest    *rest.Config
	client  kubeclient.Interface
	dyn     dynamic.Interface
	secrets *kubeclient.Informer

	mu        sync.Mutex
	factories []informerFactory
	// stop is the process's run context's Done, which the informers run
	// until; nil before the first run function starts.
	stop <-chan struct{}
}

// informerFactory is what kubeAPI starts and stops of the dynamic
// client's informer factories and of the Secrets informer
// (kubeclient.Informer).
type informerFactory interface {
	Start(stopCh <-chan struct{})
	Shutdown()
}

func newKubeAPI(cfg *config.Config) *kubeAPI { return &kubeAPI{cfg: cfg} }

// init makes the client and the factory of the Secrets informer.
func (k *kubeAPI) init() error {
	k.once.Do(func() {
		if k.rest, k.err = kubeConfig(k.cfg.Secrets); k.err != nil {
			return
		}
		if k.client, k.err = kubeclient.NewForConfig(k.rest); k.err != nil {
			k.err = fmt.Errorf("kubernetes client: %w", k.err)
			return
		}
		if k.dyn, k.err = dynamic.NewForConfig(k.rest); k.err != nil {
			k.err = fmt.Errorf("kubernetes dynamic client: %w", k.err)
			return
		}
		k.secrets = clustersecret.NewInformer(k.client, k.cfg.Secrets.Namespace)
		k.add(k.secrets)
	})
	return k.err
}

// add registers an informer factory (or informer) to start with the others.
func (k *kubeAPI) add(f informerFactory) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.factories = append(k.factories, f)
}

// run calls fn with the process's run context (both run functions call
// it), which the informers startCaches starts run until, and once fn and
// ctx have ended waits for the informers to stop.
func (k *kubeAPI) run(ctx context.Context, fn func(context.Context)) {
	k.mu.Lock()
	if k.stop == nil {
		k.stop = ctx.Done()
	}
	k.mu.Unlock()
	fn(ctx)
	<-ctx.Done()
	k.mu.Lock()
	factories := k.factories
	k.mu.Unlock()
	for _, f := range factories {
		f.Shutdown()
	}
}

// startCaches starts the informers not started yet, until the process's
// run context ends (not the lease's: they outlive a lost term). The Secret
// reconciler and the refresh trigger call it when they start leading; both
// wait for the caches to sync before reading them.
func (k *kubeAPI) startCaches(context.Context) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stop == nil {
		return // not running: run has not been called
	}
	for _, f := range k.factories {
		f.Start(k.stop)
	}
}

// newReconciler builds the cluster Secret reconciler, reading the shared
// cache of cluster Secrets, and the function that runs it: under leader
// election, or directly when that is disabled.
// With leads, the leader's inventory runs under the same Lease: one
// leader lists, writes the ledger and writes the Secrets.
func newReconciler(cfg *config.Config, kube *kubeAPI, p *parts, logger *slog.Logger, reg prometheus.Registerer, leads bool) (*clustersecret.Reconciler, func(context.Context), error) {
	if err := kube.init(); err != nil {
		return nil, nil, err
	}
	client := kube.client
	rc := cfg.Secrets.Reconciler()
	rc.Issuers = p.issuers
	if len(p.issuers) > 0 && !cfg.Secrets.DryRun {
		install, err := installationID(client, cfg.Secrets.Namespace, logger)
		if err != nil {
			return nil, nil, err
		}
		rc.Installation = install
	}
	rec, err := clustersecret.New(rc, client, p.inv, logger, reg,
		clustersecret.WithInformer(kube.secrets))
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: %w", err)
	}
	le := cfg.Secrets.LeaderElection
	if !le.Enabled {
		logger.Warn("leader election disabled: run a single replica, or several will write the same Secrets")
		return rec, func(ctx context.Context) {
			kube.run(ctx, func(ctx context.Context) { kube.startCaches(ctx); rec.RunWithoutElection(ctx) })
		}, nil
	}
	host, _ := os.Hostname()
	identity := host + "_" + uuid.NewString()
	also := []func(context.Context){kube.startCaches}
	if leads {
		also = append(also, p.inv.Run)
	}
	run := func(ctx context.Context) {
		if err := rec.RunLeading(ctx, client, lease.Config{
			Name: le.LeaseName, Identity: identity, LeaseDuration: le.LeaseDuration.Std(),
			RenewDeadline: le.RenewDeadline.Std(), RetryPeriod: le.RetryPeriod.Std(),
		}, also...); err != nil {
			logger.Error("leader election stopped", "error", err.Error())
		}
	}
	return rec, func(ctx context.Context) { kube.run(ctx, run) }, nil
}

// printSecrets writes the Secrets the reconciler would want for the served
// clusters, as YAML, with bearer tokens never read and shown redacted.
func printSecrets(w io.Writer, cfg *config.Config, snap *inventory.Snapshot) error {
	rc := cfg.Secrets.Reconciler()
	if rc.OwnerID == "" {
		rc.OwnerID = "owner-id-not-set"
	}
	if errs := rc.Options.Validate(field.NewPath("secrets")); len(errs) > 0 {
		return errs.ToAggregate()
	}
	redacted := func(sources.SecretRef) (string, error) { return "<redacted>", nil }
	var docs []string
	for i := range snap.Clusters {
		c := snap.Clusters[i]
		if rc.Select != nil && !rc.Select(c) {
			continue
		}
		d, err := clustersecret.Build(c, &rc.Options, redacted)
		if err != nil {
			return err
		}
		s := clustersecret.Redacted(d.Secret)
		s.StringData = map[string]string{}
		for k, v := range s.Data {
			s.StringData[k] = string(v)
		}
		s.Data = nil
		b, err := yaml.Marshal(s)
		if err != nil {
			return fmt.Errorf("encode secret %s: %w", s.Name, err)
		}
		docs = append(docs, string(b))
	}
	_, err := io.WriteString(w, strings.Join(docs, "---\n"))
	return err
}
