package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
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
	return c, nil
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

// newReconciler builds the cluster Secret reconciler and the function that
// runs it: under leader election, or directly when that is disabled.
func newReconciler(cfg *config.Config, inv *inventory.Inventory, logger *slog.Logger, reg prometheus.Registerer) (*clustersecret.Reconciler, func(context.Context), error) {
	rc, err := kubeConfig(cfg.Secrets)
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	rec, err := clustersecret.New(cfg.Secrets.Reconciler(), client, inv, logger, reg)
	if err != nil {
		return nil, nil, fmt.Errorf("secrets: %w", err)
	}
	le := cfg.Secrets.LeaderElection
	if !le.Enabled {
		logger.Warn("leader election disabled: run a single replica, or several will write the same Secrets")
		return rec, rec.RunWithoutElection, nil
	}
	host, _ := os.Hostname()
	identity := host + "_" + uuid.NewString()
	run := func(ctx context.Context) {
		if err := rec.RunLeading(ctx, client, clustersecret.LeaderElection{
			LeaseName: le.LeaseName, Identity: identity, LeaseDuration: le.LeaseDuration.Std(),
			RenewDeadline: le.RenewDeadline.Std(), RetryPeriod: le.RetryPeriod.Std(),
		}); err != nil {
			logger.Error("leader election stopped", "error", err.Error())
		}
	}
	return rec, run, nil
}

// printSecrets writes the Secrets the reconciler would want for the served
// clusters, as YAML, with bearer tokens never read and shown redacted.
func printSecrets(w io.Writer, cfg *config.Config, snap *inventory.Snapshot) error {
	rc := cfg.Secrets.Reconciler()
	if rc.OwnerID == "" {
		rc.OwnerID = "owner-id-not-set"
	}
	if err := rc.Options.Validate(); err != nil {
		return fmt.Errorf("secrets: %w", err)
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
