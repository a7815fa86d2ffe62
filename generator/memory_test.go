package generator

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testca"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/static"
)

// distinctCAs returns n distinct caData values the size of an RSA 2048 CA
// certificate's (~1.5 KiB), as every EKS and AKS cluster has its own. One
// certificate is signed; the others differ from it in the last bytes of
// the signature, which parsing does not check: signing 10,000 would take
// a minute.
func distinctCAs(t testing.TB, n int) []string {
	t.Helper()
	signer, err := testca.NewSigner()
	require.NoError(t, err)
	der, err := signer.DER(1)
	require.NoError(t, err)
	out := make([]string, n)
	for i := range out {
		binary.BigEndian.PutUint32(der[len(der)-4:], uint32(i))
		out[i] = testca.CAData(der)
	}
	require.NoError(t, sources.ValidateCAData(out[n-1]))
	return out
}

// writeFleetFile writes the clusters i of [0, n) with i%files == part to
// path, in the shape cmd/loadgen gives them: labels, an annotation, AWS
// auth and a CA of their own.
func writeFleetFile(t testing.TB, path string, cas []string, files, part int) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w := bufio.NewWriter(f)
	envs, regions := []string{"prod", "staging", "dev"}, []string{"eu-west-1", "eu-central-1", "us-east-1", "westeurope"}
	fmt.Fprintln(w, "clusters:")
	for i := part; i < len(cas); i += files {
		tenant, env, region := fmt.Sprintf("tenant-%02d", i%20), envs[i%3], regions[i%4]
		name := fmt.Sprintf("%s-%s-%06d", tenant, env, i)
		fmt.Fprintf(w, "  - name: %s\n    server: https://c%06d.k8s.cluster-discovery.invalid\n    caData: %s\n", name, i, cas[i])
		fmt.Fprintf(w, "    tenant: %s\n    project: %s\n    region: %s\n    account: \"111111111111\"\n    kubernetesVersion: v1.31.4\n", tenant, tenant, region)
		fmt.Fprintf(w, "    labels: {tenant: %s, env: %s, region: %s, tier: t%d}\n    annotations: {owner: team-%s@example.com}\n", tenant, env, region, i/7%3, tenant)
		fmt.Fprintf(w, "    auth: {aws: {clusterName: %s, roleARN: \"arn:aws:iam::111111111111:role/argocd\", region: %s}}\n", name, region)
	}
	require.NoError(t, w.Flush())
}

// TestFleetMemory lists 10,000 clusters, each with its own CA, from two
// static files through the static sources and the inventory, answers every
// cluster once (which keeps the snapshot's encoding), and bounds the live
// heap all that holds per cluster. Under the race detector it lists 2,000.
//
// Per cluster, ~2,300 bytes: its CA (768, the size class of the ~760
// bytes of an RSA 2048 CA's DER; its 1,444 bytes of base64 PEM took
// 1,536) and its entry in the process's table of CAs (~110: sources.CA
// is a unique.Handle, so that the ledger's view and the leader's listing
// share one copy of each CA, ~11 MiB less at 10,000), the cluster twice (the static source's listing and the
// inventory's, 376 bytes each), its encoded parameters (~430), what the
// lifecycle tracks (~150), its name, server and AWS auth (~120). Labels,
// annotations and the strings clusters share are held once (a label and
// an annotation map per cluster took ~650 more).
func TestFleetMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and lists 10,000 clusters")
	}
	n := 10000
	if raceEnabled {
		n = 2000
	}
	dir := t.TempDir()
	cas := distinctCAs(t, n)
	files := []string{"fleet-a", "fleet-b"}
	for part, name := range files {
		writeFleetFile(t, filepath.Join(dir, name+".yaml"), cas, len(files), part)
	}
	tokens := tokenSet(t, demoToken)

	before := liveHeap()
	var specs []inventory.SourceSpec
	for _, name := range files {
		src, err := static.New(static.Config{File: name + ".yaml"}, dir)
		require.NoError(t, err)
		specs = append(specs, inventory.SourceSpec{Name: name, Provider: sources.ProviderStatic, Source: src, Interval: time.Hour, Timeout: time.Minute})
	}
	inv, err := inventory.New(specs, inventory.Options{})
	require.NoError(t, err)
	require.NoError(t, inv.RefreshAll(context.Background()))
	h := newServer(t, inv, func(o *Options) { o.Tokens = tokens }).Handler()
	w := &discardWriter{h: http.Header{}}
	h.ServeHTTP(w, rawRequest(http.MethodPost, GetParamsPath, []byte(allBody), "Bearer "+demoToken))
	require.Equal(t, http.StatusOK, w.code)
	held := liveHeap() - before
	runtime.KeepAlive(h)
	require.Len(t, inv.Snapshot().Clusters, n)

	perCluster := held / uint64(n)
	t.Logf("%d clusters: %.1f MiB live heap, %d bytes per cluster", n, float64(held)/(1<<20), perCluster)
	assert.LessOrEqual(t, perCluster, uint64(2700), "live heap per cluster (2,573 under the race detector)")
}
