package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/kubernetes/scheme"
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
	// leases, when not nil, holds the Leases written, by path, read back
	// as written: leader election works. When nil every Lease request is
	// refused, and no process ever leads.
	leases map[string]*coordinationv1.Lease
}

// serveLease answers a request for a Lease from f.leases.
func (f *fakeKube) serveLease(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[r.Method+" lease"]++
	status := func(code int, reason string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
	}
	if f.leases == nil {
		status(http.StatusForbidden, "Forbidden")
		return
	}
	write := func(code int, l *coordinationv1.Lease) {
		l.APIVersion, l.Kind = "coordination.k8s.io/v1", "Lease"
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(l)
	}
	if r.Method == http.MethodGet {
		if l, ok := f.leases[r.URL.Path]; ok {
			write(http.StatusOK, l)
		} else {
			status(http.StatusNotFound, "NotFound")
		}
		return
	}
	body, _ := io.ReadAll(r.Body)
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	l, ok := obj.(*coordinationv1.Lease)
	if err != nil || !ok {
		status(http.StatusBadRequest, "BadRequest")
		return
	}
	path := r.URL.Path
	if r.Method == http.MethodPost {
		path += "/" + l.Name
	}
	l.ResourceVersion = fmt.Sprint(len(f.leases) + f.requests[r.Method+" lease"] + 1)
	f.leases[path] = l
	write(map[bool]int{true: http.StatusCreated, false: http.StatusOK}[r.Method == http.MethodPost], l)
}

func (f *fakeKube) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.Path, "/leases") {
		f.serveLease(w, r)
		return
	}
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
	stop := runSecretsAndRefresh(t, fk, `leaderElection: {enabled: false}`, `[argo, team-a]`)
	secrets := "/api/v1/namespaces/argo/secrets"
	require.Eventually(t, func() bool {
		return fk.count("WATCH "+secrets) >= 1 && fk.count("WATCH /apis/argoproj.io/v1alpha1/namespaces/team-a/applicationsets") >= 1
	}, 10*time.Second, 10*time.Millisecond, "the informers list and watch")
	time.Sleep(100 * time.Millisecond)
	stop() // the informers stopped too (goleak checks at the end)

	assert.Equal(t, 1, fk.count("LIST "+secrets), "one cache of cluster Secrets for both")
	assert.Equal(t, []string{"argocd.argoproj.io/secret-type=cluster"}, fk.selectors)
	for _, ns := range []string{"argo", "team-a"} {
		assert.Equal(t, 1, fk.count("LIST /apis/argoproj.io/v1alpha1/namespaces/"+ns+"/applicationsets"), ns)
	}
	assert.Zero(t, fk.count("LIST /api/v1/secrets"), "no cluster-wide list")
}

// TestCachesOnlyWhenLeading: a replica reads the cluster Secrets and the
// ApplicationSets only once it leads (the Secret reconciler's Lease, or
// the refresh trigger's): a follower answers from the ledger and would
// hold them for nothing. One that never wins a Lease never lists them;
// one that wins both lists each once.
func TestCachesOnlyWhenLeading(t *testing.T) {
	for _, leads := range []bool{false, true} {
		t.Run(fmt.Sprintf("leads=%t", leads), func(t *testing.T) {
			fk := &fakeKube{requests: map[string]int{}}
			if leads {
				fk.leases = map[string]*coordinationv1.Lease{}
			}
			stop := runSecretsAndRefresh(t, fk, `leaderElection: {enabled: true, retryPeriod: 100ms}`, `[argo]`)
			secrets, appsets := "/api/v1/namespaces/argo/secrets", "/apis/argoproj.io/v1alpha1/namespaces/argo/applicationsets"
			if leads {
				// (a WATCH may come first: the streaming list the fake refuses)
				require.Eventually(t, func() bool {
					return fk.count("LIST "+secrets) >= 1 && fk.count("LIST "+appsets) >= 1
				}, 10*time.Second, 10*time.Millisecond, "the leader lists")
				time.Sleep(100 * time.Millisecond)
			} else {
				require.Eventually(t, func() bool { return fk.count("GET lease") >= 4 }, 10*time.Second, 10*time.Millisecond,
					"both campaign")
				time.Sleep(500 * time.Millisecond)
			}
			stop()
			want := map[bool]int{false: 0, true: 1}[leads]
			assert.Equal(t, want, fk.count("LIST "+secrets), "cluster Secrets")
			assert.Equal(t, want, fk.count("LIST "+appsets), "ApplicationSets")
		})
	}
}

// runSecretsAndRefresh runs the Secret reconciler and the refresh trigger
// of one process against fk, with the given secrets.leaderElection and
// applicationSetRefresh.namespaces; stop ends them and waits.
func runSecretsAndRefresh(t *testing.T, fk *fakeKube, election, namespaces string) (stop func()) {
	t.Helper()
	srv := httptest.NewServer(fk)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg, err := config.Parse([]byte(`server: {tokens: [{env: T}]}
sources: [{name: one, provider: static, static: {clusters: [{name: a, server: "https://a.example.com"}]}}]
secrets: {enabled: true, ownerID: fleet-a, namespace: argo, kubeconfig: `+writeFakeKubeconfig(t, dir, srv.URL)+`, `+election+`}
applicationSetRefresh: {enabled: true, namespaces: `+namespaces+`}
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
	return func() { cancel(); wg.Wait() }
}
