package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/cmd/argocd-cluster-discovery/config"
)

// fakeKube answers the lists and watches of Secrets and ApplicationSets
// with empty lists and quiet watches, and counts them by "VERB path".
type fakeKube struct {
	mu       sync.Mutex
	requests map[string]int
	// selectors are the label selectors of the lists of Secrets
	selectors []string
}

func (f *fakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	verb := "LIST"
	if q.Get("watch") == "true" || q.Get("watch") == "1" {
		verb = "WATCH"
	}
	f.mu.Lock()
	f.requests[verb+" "+r.URL.Path]++
	if verb == "LIST" && filepath.Base(r.URL.Path) == "secrets" {
		f.selectors = append(f.selectors, q.Get("labelSelector"))
	}
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case verb == "WATCH" && q.Get("sendInitialEvents") == "true": // as a server without streaming lists
		w.WriteHeader(http.StatusUnprocessableEntity)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Invalid","code":422}`)
	case verb == "WATCH":
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	case filepath.Base(r.URL.Path) == "secrets":
		fmt.Fprint(w, `{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	case filepath.Base(r.URL.Path) == "applicationsets":
		fmt.Fprint(w, `{"kind":"ApplicationSetList","apiVersion":"argoproj.io/v1alpha1","metadata":{"resourceVersion":"1"},"items":[]}`)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)
	}
}

// writeFakeKubeconfig writes a kubeconfig in dir for the API server at
// url, and returns its path.
func writeFakeKubeconfig(t *testing.T, dir, url string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fake"] = &clientcmdapi.Cluster{Server: url}
	kc.Contexts["fake"] = &clientcmdapi.Context{Cluster: "fake"}
	kc.CurrentContext = "fake"
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

func (f *fakeKube) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[key]
}

// TestOneCacheOfClusterSecrets: the reconciler and the refresh trigger read
// one shared informer of the cluster Secrets of Argo CD's namespace (one
// LIST, one WATCH, label-selected), the trigger an informer of the
// ApplicationSets of each namespace, and every informer stops with the run
// context.
func TestOneCacheOfClusterSecrets(t *testing.T) {
	fk := &fakeKube{requests: map[string]int{}}
	srv := httptest.NewServer(fk)
	defer srv.Close()
	dir := t.TempDir()
	kubeconfig := writeFakeKubeconfig(t, dir, srv.URL)
	cfg, err := config.Parse([]byte(`server: {tokens: [{env: T}]}
sources: [{name: one, provider: static, static: {clusters: [{name: a, server: "https://a.example.com"}]}}]
secrets: {enabled: true, ownerID: fleet-a, namespace: argo, kubeconfig: `+kubeconfig+`, leaderElection: {enabled: false}}
applicationSetRefresh: {enabled: true, namespaces: [argo, team-a]}
`), dir)
	require.NoError(t, err)
	logger := slog.New(slog.DiscardHandler)
	reg := prometheus.NewRegistry()
	inv, err := buildInventory(cfg, logger, reg, nil)
	require.NoError(t, err)

	kube := newKubeAPI(cfg)
	_, runSecrets, err := newReconciler(cfg, kube, &parts{inv: inv}, logger, reg, false)
	require.NoError(t, err)
	runRefresh, err := newAppSetRefresh(cfg, kube, inv, logger, reg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){runSecrets, runRefresh} {
		wg.Go(func() { run(ctx) })
	}
	secrets := "/api/v1/namespaces/argo/secrets"
	require.Eventually(t, func() bool {
		return fk.count("WATCH "+secrets) >= 1 && fk.count("WATCH /apis/argoproj.io/v1alpha1/namespaces/team-a/applicationsets") >= 1
	}, 10*time.Second, 10*time.Millisecond, "the informers list and watch")
	time.Sleep(100 * time.Millisecond)
	cancel()
	wg.Wait() // the informers stopped too (goleak checks at the end)

	assert.Equal(t, 1, fk.count("LIST "+secrets), "one cache of cluster Secrets for both")
	assert.Equal(t, []string{"argocd.argoproj.io/secret-type=cluster"}, fk.selectors)
	for _, ns := range []string{"argo", "team-a"} {
		assert.Equal(t, 1, fk.count("LIST /apis/argoproj.io/v1alpha1/namespaces/"+ns+"/applicationsets"), ns)
	}
	assert.Zero(t, fk.count("LIST /api/v1/secrets"), "no cluster-wide list")
}
