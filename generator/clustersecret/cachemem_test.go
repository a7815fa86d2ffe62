package clustersecret

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	goruntime "runtime"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/kubeclient"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// fleetSecrets are the Secrets of n clusters as kube-apiserver would send
// them in a list, protobuf-encoded: our desired Secrets (each cluster with
// its own CA, ~2.2 KB of config) with uid, resourceVersion, creation time
// and the managedFields entry of our writes.
func fleetSecrets(t testing.TB, n int) []byte {
	t.Helper()
	opts := Options{Namespace: "argocd", OwnerID: "fleet-a", Prefix: "cluster"}
	require.Empty(t, opts.Validate(nil))
	list := &corev1.SecretList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "SecretList"}, ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	der := make([]byte, 1100) // an RSA 2048 CA certificate's size
	fields := []byte(`{"f:data":{".":{},"f:config":{},"f:name":{},"f:server":{}},"f:metadata":{"f:annotations":{".":{},` +
		`"f:argocd-cluster-discovery.io/cluster":{},"f:argocd-cluster-discovery.io/cluster-id":{},` +
		`"f:argocd-cluster-discovery.io/propagated-annotations":{},"f:argocd-cluster-discovery.io/propagated-labels":{}},` +
		`"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:argocd-cluster-discovery.io/owner":{},` +
		`"f:argocd-cluster-discovery.io/phase":{},"f:argocd-cluster-discovery.io/source":{},"f:argocd.argoproj.io/secret-type":{},` +
		`"f:env":{},"f:provider":{},"f:region":{},"f:tenant":{}}},"f:type":{}}`)
	created := metav1.NewTime(time.Now().Truncate(time.Second))
	for i := range n {
		_, err := rand.Read(der)
		require.NoError(t, err)
		ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
		name := fmt.Sprintf("eks-prod-%05d", i)
		c := &sources.Cluster{Name: name, Source: "eks", Provider: sources.ProviderEKS, Server: "https://" + name + ".gr7.eu-west-1.eks.amazonaws.com",
			CA: sources.CAFromData(ca), Region: "eu-west-1", Account: "123456789012", Tenant: "acme", Labels: map[string]string{"env": "prod"},
			Auth: sources.Auth{Kind: sources.AuthAWS, AWS: &sources.AWSAuth{ClusterName: name, RoleARN: "arn:aws:iam::123456789012:role/argocd"}}}
		d, err := Build(c, &opts, nil)
		require.NoError(t, err)
		s := d.Secret
		s.TypeMeta = metav1.TypeMeta{}
		s.UID = types.UID(uuid.NewString())
		s.ResourceVersion = strconv.Itoa(1000 + i)
		s.CreationTimestamp = created
		s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "argocd-cluster-discovery", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Time: &created, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(string(fields))}}
		list.Items = append(list.Items, *s)
	}
	b, err := runtime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), list)
	require.NoError(t, err)
	return b
}

// listOnce serves one encoded list, decoded afresh as client-go decodes a
// response, and a watch that stays quiet.
type listOnce struct{ body []byte }

func (l listOnce) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	obj, err := runtime.Decode(scheme.Codecs.UniversalDeserializer(), l.body)
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.SecretList), nil
}

func (listOnce) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return watch.NewFake(), nil
}

// IsWatchListSemanticsUnSupported makes the reflector list, not stream.
func (listOnce) IsWatchListSemanticsUnSupported() bool { return true }

// cacheHeap is the live heap an informer's cache of body's Secrets takes:
// the service's informer (newInformer: Records by CacheTransform) when
// service is true, else the same informer keeping the Secrets as they come.
func cacheHeap(t testing.TB, body []byte, service bool) (uint64, cache.SharedIndexInformer) {
	t.Helper()
	var inf cache.SharedIndexInformer = kubeclient.NewInformer(listOnce{body}, &corev1.Secret{}, nil, nil)
	if service {
		inf = newInformer(listOnce{body})
	}
	before := liveHeap()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); inf.Run(ctx.Done()) }()
	t.Cleanup(func() { cancel(); <-done })
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	return liveHeap() - before, inf
}

func liveHeap() uint64 {
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestCacheHeapAt10000Secrets measures the live heap of the cache of
// 10,000 cluster Secrets, kept as Records by CacheTransform and as they
// come, and holds the Records to their budget (4.9 MiB measured; 5.3 with
// the namespace index client-go's factory adds, which the service's
// informer goes without). The cache holds no config value.
func TestCacheHeapAt10000Secrets(t *testing.T) {
	const n, budget = 10_000, 5<<20 + 256<<10
	body := fleetSecrets(t, n)
	const mib = 1 << 20
	full, _ := cacheHeap(t, body, false)
	trimmed, inf := cacheHeap(t, body, true)
	require.Len(t, inf.GetStore().List(), n)
	t.Logf("cache of %d cluster Secrets (list %.1f MiB protobuf): %.1f MiB trimmed by CacheTransform (%d B a Secret), %.1f MiB as listed",
		n, float64(len(body))/mib, float64(trimmed)/mib, trimmed/n, float64(full)/mib)
	assert.Less(t, trimmed, uint64(budget), "the trimmed cache fits its budget")
	assert.Less(t, trimmed, full/2, "trimming at least halves the cache")
	assert.Empty(t, inf.GetIndexer().GetIndexers(), "no index: a pass reads the store whole")
	for _, o := range inf.GetStore().List() {
		s := o.(*Record)
		require.Nil(t, s.Full(), s.Name)
		require.NotEqual(t, [32]byte{}, s.digest, s.Name)
	}
	goruntime.KeepAlive(body)
}
