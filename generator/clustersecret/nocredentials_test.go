package clustersecret

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/testlog"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// Distinctive bearer tokens: the one in the token Secret, and the one it is
// rotated to.
const (
	ncToken   = "sha256~NoCredBearerTokenOfTheFleet-7q2w9e4r5t6y8u1i3o0p"
	ncRotated = "sha256~NoCredRotatedBearerToken-z1x2c3v4b5n6m7l8k9j0"
)

// ncConflicter makes the API refuse the next update of one Secret: just
// before the update is sent, another writer changes the Secret, so that the
// update's resourceVersion is stale (a real 409 from kube-apiserver).
type ncConflicter struct {
	rt     http.RoundTripper
	admin  kubernetes.Interface
	ns     string
	secret atomic.Pointer[string]
	status atomic.Int32
}

func (c *ncConflicter) RoundTrip(r *http.Request) (*http.Response, error) {
	if name := c.secret.Load(); name != nil && r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/secrets/"+*name) {
		c.secret.Store(nil)
		ctx := context.Background()
		s, err := c.admin.CoreV1().Secrets(c.ns).Get(ctx, *name, metav1.GetOptions{})
		if err == nil {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations["note"] = "changed by another writer"
			_, err = c.admin.CoreV1().Secrets(c.ns).Update(ctx, s, metav1.UpdateOptions{})
		}
		if err != nil {
			return nil, fmt.Errorf("conflicter: %w", err)
		}
		resp, err := c.rt.RoundTrip(r)
		if resp != nil {
			c.status.Store(int32(resp.StatusCode))
		}
		return resp, err
	}
	return c.rt.RoundTrip(r)
}

// ncHarness runs reconcilers of one fleet, whose bearer token is read from
// the Secret fleet-token, at debug level through a client whose updates
// can be made to conflict, and keeps what they say.
type ncHarness struct {
	t          *testing.T
	e          *env
	f          *fleet
	client     kubernetes.Interface
	conflicter *ncConflicter
	logs       testlog.Buffer
	logger     *slog.Logger
	texts      []string // pass errors, plans and statuses
	caches     []cache.SharedIndexInformer
}

func newNCHarness(t *testing.T) *ncHarness {
	h := &ncHarness{t: t, e: newEnv(t)}
	_, err := h.e.admin.CoreV1().Secrets(h.e.ns).Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-token", Namespace: h.e.ns},
		StringData: map[string]string{"token": ncToken + "\n"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	h.f = newFleet(t, "aro")

	// A client whose updates of the cluster Secret can be made to conflict.
	cfg := rest.CopyConfig(restConfig)
	h.conflicter = &ncConflicter{admin: h.e.admin, ns: h.e.ns}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { h.conflicter.rt = rt; return h.conflicter })
	h.client, err = kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	h.logger = slog.New(slog.NewJSONHandler(&h.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return h
}

// newRec returns a reconciler with its own informer.
func (h *ncHarness) newRec(dryRun bool) *Reconciler {
	c := Config{Options: Options{Namespace: h.e.ns, OwnerID: "test-owner",
		Credentials: map[string]CredentialOverride{"fleet": {BearerToken: &sources.SecretRef{Secret: &sources.SecretKeyRef{Name: "fleet-token", Key: "token"}}}}},
		Policy: PolicySync, DryRun: dryRun, Prune: PruneOptions{AfterListings: 2, MaxDeletions: 5, MaxDeletionsPercent: 10}, Concurrency: 4}
	inf := informerFor(h.t, h.client, h.e.ns)
	h.caches = append(h.caches, inf)
	r, err := New(defaulted(c), h.client, h.f.inv, h.logger, prometheus.NewRegistry(), WithInformer(inf))
	require.NoError(h.t, err)
	return r
}

// run makes a pass of r and keeps its error, plan and status as text.
func (h *ncHarness) run(r *Reconciler) (Changes, error) {
	caughtUp(h.t, r)
	ch, err := r.Pass(context.Background())
	if err != nil {
		h.texts = append(h.texts, err.Error(), fmt.Sprintf("%+v", err))
	}
	st, jerr := json.Marshal(r.Status())
	require.NoError(h.t, jerr)
	h.texts = append(h.texts, ch.String(), string(st), fmt.Sprintf("%+v", r.Status()))
	return ch, err
}

// secretConfig is the config of the cluster Secret.
func (h *ncHarness) secretConfig() string {
	s, err := h.e.admin.CoreV1().Secrets(h.e.ns).Get(context.Background(), sn("aro"), metav1.GetOptions{})
	require.NoError(h.t, err)
	return string(s.Data["config"])
}

// TestNoCredentialInLogsOrStatus runs the reconciler at debug level with a
// bearer token read from a Secret reference: the Secret is created with the
// token, the token is rotated and the update conflicts with another writer,
// the token Secret goes missing, and a dry run plans the same; the tokens
// never appear in the logs, Status(), the pass errors or the plans' text.
func TestNoCredentialInLogsOrStatus(t *testing.T) {
	h := newNCHarness(t)
	e, ctx := h.e, context.Background()
	r := h.newRec(false)
	_, err := h.run(r)
	require.NoError(t, err)
	require.Contains(t, h.secretConfig(), ncToken, "the Secret carries the token")
	_, err = h.run(r) // steady state
	require.NoError(t, err)

	// A dry run with a rotated token plans an update and writes nothing.
	_, err = e.admin.CoreV1().Secrets(e.ns).Update(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-token", Namespace: e.ns},
		StringData: map[string]string{"token": ncRotated}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	ch, err := h.run(h.newRec(true))
	require.NoError(t, err)
	require.Len(t, ch.Update, 1, "the dry run plans the rotation")
	assert.Contains(t, h.secretConfig(), ncToken, "and writes nothing")

	// The rotation's update conflicts with another writer.
	name := sn("aro")
	h.conflicter.secret.Store(&name)
	_, _ = h.run(r)
	assert.Equal(t, int32(http.StatusConflict), h.conflicter.status.Load(), "the update conflicted")
	_, err = h.run(r) // the next pass writes it
	require.NoError(t, err)
	require.Contains(t, h.secretConfig(), ncRotated)

	// The token Secret goes missing: the cluster is held.
	require.NoError(t, e.admin.CoreV1().Secrets(e.ns).Delete(ctx, "fleet-token", metav1.DeleteOptions{}))
	_, _ = h.run(r)
	assert.Equal(t, []string{"aro"}, r.Status().Held)
	_, _ = h.run(h.newRec(true))
	h.assertNoToken()
}

// assertNoToken checks the caches, the debug log and the texts kept.
func (h *ncHarness) assertNoToken() {
	t := h.t
	for _, inf := range h.caches { // the caches of cluster Secrets hold digests of config
		for _, o := range inf.GetStore().List() {
			s := o.(*Record)
			require.Nil(t, s.Full(), "the cache holds no full Secret")
			for _, token := range []string{ncToken, ncRotated} {
				assert.NotContains(t, fmt.Sprintf("%#v", *s), token, "the cache holds the token in %s", s.Name)
			}
		}
	}
	require.NotEmpty(t, h.logs.String(), "debug logging is on")
	assert.Contains(t, h.logs.String(), "dry run", "the dry run logged its plan")
	for where, text := range map[string]string{"the debug log": h.logs.String(), "the errors, plans and statuses": strings.Join(h.texts, "\n")} {
		for _, s := range []string{ncToken, ncRotated, "NoCredBearerTokenOfTheFleet", "NoCredRotatedBearerToken"} {
			assert.NotContains(t, text, s, "%s holds the token", where)
		}
	}
}
