package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/generator/clustersecret"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory/clusterprofile"
)

// The apiserver's ceiling (-ceiling): the writes the service makes per
// cluster on a cold start (its Secret, its ClusterProfile, the
// ClusterProfile's status), made by an ideal client on a fresh
// kube-apiserver and etcd: no rate limit, no informer or watch, request
// bodies built before the clock starts (the ClusterProfiles' by the
// ledger's own code), answers not decoded (but the Secrets'). What it
// takes is what this machine's apiserver needs for those writes, whatever
// the client.

// ceilingWorkers is how many writes the ideal client has in flight: as
// many as the service's ledger (clusterprofile.Writers), and for the
// statuses clusterprofile.StatusWriters, as the ledger.
const ceilingWorkers = clusterprofile.Writers

// ceilingOwner is the owner id of the objects written, the one the service
// is configured with (kubeConfigSection).
const ceilingOwner = "loadgen"

// ceilingResult is the time each kind of write took the ideal client, one
// kind after the other, and in all.
type ceilingResult struct {
	Workers int `json:"workers"`
	// Secrets is n Secrets created (protobuf), Creates n ClusterProfiles
	// created (JSON), Status n server-side applies of their status.
	Secrets time.Duration `json:"secretsNs"`
	Creates time.Duration `json:"createsNs"`
	Status  time.Duration `json:"statusNs"`
	// Total is from the first write to the last: the three phases.
	Total time.Duration `json:"totalNs"`
	// Writes is the number of writes, 3 per cluster.
	Writes int `json:"writes"`
}

// ceilingClient is the ideal client: Secrets in protobuf through the typed
// client, ClusterProfiles in JSON through a REST client that reads only
// the answers' status, as the service's ledger does.
type ceilingClient struct {
	secrets  typedcorev1.SecretInterface
	profiles rest.Interface
}

// newCeilingClient returns the ideal client of the apiserver of cfg: QPS
// -1 (no client-side rate limit).
func newCeilingClient(cfg *rest.Config) (*ceilingClient, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	c.UserAgent = "loadgen-ceiling"
	core := rest.CopyConfig(c)
	core.ContentType = runtime.ContentTypeProtobuf
	core.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	kube, err := kubernetes.NewForConfig(core)
	if err != nil {
		return nil, fmt.Errorf("ceiling client: %w", err)
	}
	raw := rest.CopyConfig(c)
	gv := clusterprofile.Resource.GroupVersion()
	raw.GroupVersion, raw.APIPath = &gv, "/apis"
	raw.ContentType, raw.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON // custom resources have no protobuf
	raw.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	profiles, err := rest.RESTClientFor(raw)
	if err != nil {
		return nil, fmt.Errorf("ceiling client: %w", err)
	}
	return &ceilingClient{secrets: kube.CoreV1().Secrets(argoNS), profiles: profiles}, nil
}

// measureCeiling starts a fresh kube-apiserver and etcd in dir, writes the
// Secret, the ClusterProfile and its status of every cluster of cs (with
// caData, by index) with the ideal client, and stops them. Any failed
// write fails it.
func measureCeiling(ctx context.Context, assets, dir string, cs []cluster, caData []string, log io.Writer) (*ceilingResult, error) {
	n := len(cs)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: apiserver ceiling: starting a fresh kube-apiserver and etcd\n", n)
	kube, err := startKube(ctx, assets, dir)
	if err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	defer kube.stop()
	c, err := newCeilingClient(kube.env.Config)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	cr := &ceilingResult{Workers: ceilingWorkers, Writes: 3 * n}

	secrets := make([]*corev1.Secret, n)
	for i := range cs {
		if secrets[i], err = ceilingSecret(&cs[i], caData[i]); err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
	}
	if cr.Secrets, err = inParallel(ctx, n, ceilingWorkers, func(ctx context.Context, i int) error {
		if _, err := c.secrets.Create(ctx, secrets[i], metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create secret %s: %w", secrets[i].Name, err)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: apiserver ceiling: %d Secrets in %s\n", n, n, cr.Secrets.Round(time.Millisecond))

	names, bodies, statuses := make([]string, n), make([][]byte, n), make([][]byte, n)
	for i := range cs {
		if names[i], bodies[i], statuses[i], err = ceilingProfile(&cs[i], caData[i], now); err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
	}
	if cr.Creates, err = inParallel(ctx, n, ceilingWorkers, func(ctx context.Context, i int) error {
		err := c.profiles.Post().Namespace(argoNS).Resource(clusterprofile.Resource.Resource).
			Param("fieldManager", clusterprofile.Manager).Body(bodies[i]).Do(ctx).Error()
		if err != nil {
			return fmt.Errorf("create clusterprofile %s: %w", names[i], err)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: apiserver ceiling: %d ClusterProfiles in %s\n", n, n, cr.Creates.Round(time.Millisecond))

	if cr.Status, err = inParallel(ctx, n, clusterprofile.StatusWriters, func(ctx context.Context, i int) error {
		err := c.profiles.Patch(types.ApplyPatchType).Namespace(argoNS).Resource(clusterprofile.Resource.Resource).
			Name(names[i]).SubResource("status").Param("fieldManager", clusterprofile.Manager).Param("force", "true").
			Body(statuses[i]).Do(ctx).Error()
		if err != nil {
			return fmt.Errorf("apply status of clusterprofile %s: %w", names[i], err)
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("ceiling: %w", err)
	}
	fmt.Fprintf(log, "loadgen: %d clusters: apiserver ceiling: %d status applies in %s\n", n, n, cr.Status.Round(time.Millisecond))
	cr.Total = cr.Secrets + cr.Creates + cr.Status
	return cr, nil
}

// inParallel runs write for 0 … n-1, workers at a time, and
// returns how long they took; the first error stops it and is returned.
func inParallel(ctx context.Context, n, workers int, write func(ctx context.Context, i int) error) (time.Duration, error) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	start := time.Now()
	for i := range n {
		if ctx.Err() != nil {
			break // a write failed: the others would fail too
		}
		g.Go(func() error { return write(ctx, i) })
	}
	err := g.Wait()
	return time.Since(start), err
}

// ceilingCluster is the cluster c as the static source lists it, with the
// CA caData.
func ceilingCluster(c *cluster, caData string) *sources.Cluster {
	return &sources.Cluster{
		Source: c.source, Provider: sources.ProviderStatic, Name: c.name, Server: c.server, CA: sources.CAFromData(caData),
		Auth:        sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: c.name, RoleARN: "arn:aws:iam::111111111111:role/argocd"}},
		Labels:      map[string]string{"tenant": c.tenant, "env": c.env, "region": c.region, "tier": c.tier},
		Annotations: map[string]string{"owner": "team-" + c.tenant + "@example.com"},
		Region:      c.region, Account: "111111111111", Tenant: c.tenant, Project: c.tenant, KubernetesVersion: "v1.31.4",
		Phase: sources.PhaseReady, Ready: true,
	}
}

// ceilingSecret is the Argo CD cluster Secret the service writes for c:
// its labels and annotations, and name, server, project and a config
// holding caData and the AWS authentication.
func ceilingSecret(c *cluster, caData string) (*corev1.Secret, error) {
	config, err := json.Marshal(map[string]any{
		"tlsClientConfig": map[string]any{"insecure": false, "caData": caData},
		"awsAuthConfig":   map[string]any{"clusterName": c.name, "roleARN": "arn:aws:iam::111111111111:role/argocd"},
	})
	if err != nil {
		return nil, fmt.Errorf("encode config of %s: %w", c.name, err)
	}
	labels := map[string]string{"tenant": c.tenant, "env": c.env, "region": c.region, "tier": c.tier,
		clustersecret.LabelPhase: string(sources.PhaseReady), clustersecret.LabelSecretType: "cluster",
		clustersecret.LabelManagedBy: clustersecret.ManagedByValue, clustersecret.LabelOwner: ceilingOwner, clustersecret.LabelSource: c.source}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: clustersecret.SecretName(clustersecret.DefaultPrefix, c.source, c.name, c.name), Namespace: argoNS, Labels: labels,
			Annotations: map[string]string{"owner": "team-" + c.tenant + "@example.com",
				clustersecret.AnnotationLabels: "env,region,tenant,tier", clustersecret.AnnotationAnnotations: "owner",
				clustersecret.AnnotationCluster: c.name, clustersecret.AnnotationClusterID: c.name},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{"name": []byte(c.name), "server": []byte(c.server), "config": config, "project": []byte(c.tenant)},
	}, nil
}

// ceilingProfile is the name of the ClusterProfile the service keeps for
// c and the bodies of the two writes it makes for it on a cold start: its
// create (its labels, its record, ~2 KB of JSON with the CA, and its spec)
// and its status's apply (conditions, properties, version, the access
// provider with the CA), built by the ledger's own code.
func ceilingProfile(c *cluster, caData string, now time.Time) (name string, create, status []byte, err error) {
	r := inventory.Record{Source: c.source, ID: c.name, Rendering: ceilingCluster(c, caData), Served: true,
		Established: now.UTC().Truncate(time.Second), Holds: c.name}
	name, create, status, err = clusterprofile.FirstWrites(clusterprofile.Options{Namespace: argoNS, OwnerID: ceilingOwner}, &r, now)
	if err != nil {
		return "", nil, nil, fmt.Errorf("clusterprofile of %s: %w", c.name, err)
	}
	return name, create, status, nil
}
