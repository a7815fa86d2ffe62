package appsetrefresh

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/lease"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRefreshPatchesOnlyApplicationSetsUsingThePlugin(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t)
	res, err := tr.Refresh(context.Background(), "test")
	require.NoError(t, err)

	assert.Equal(t, 3, res.Matched)
	assert.Equal(t, map[string]int{OutcomePatched: 2, OutcomeRepatched: 1}, res.Outcomes)
	// the pending one is patched twice: annotation removed, then set again
	assert.ElementsMatch(t, []string{"argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}, w.patched())
	for _, name := range []string{"acme", "nested", "pending"} {
		assert.Equal(t, "true", w.annotations(t, "argocd", name)[AnnotationRefresh], name)
	}
	assert.Equal(t, "me", w.annotations(t, "argocd", "pending")["keep"], "other annotations are left alone")
	assert.Empty(t, w.annotations(t, "argocd", "globex-clusters"), "cluster generator ApplicationSets are woken by Argo CD itself")
	assert.Empty(t, w.annotations(t, "argocd", "other-plugin"))
	assert.Empty(t, w.annotations(t, "team-a", "team-appset"), "namespace not configured")

	assert.Equal(t, 2.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomePatched)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomeRepatched)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("success")))
}

func TestRefreshSendsAMergePatchOfTheAnnotationOnly(t *testing.T) {
	w := newWorld()
	_, err := w.trigger(t).Refresh(context.Background(), "test")
	require.NoError(t, err)
	var bodies []string
	for _, a := range w.dyn.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok {
			assert.Equal(t, types.MergePatchType, p.GetPatchType())
			bodies = append(bodies, string(p.GetPatch()))
		}
	}
	assert.Contains(t, bodies, `{"metadata":{"annotations":{"argocd.argoproj.io/application-set-refresh":"true"}}}`)
	assert.Contains(t, bodies, `{"metadata":{"annotations":{"argocd.argoproj.io/application-set-refresh":null}}}`)
}

func TestRefreshNamespaces(t *testing.T) {
	for _, tt := range []struct {
		namespaces []string
		want       []string
	}{
		{[]string{"team-a"}, []string{"team-a/team-appset"}},
		{[]string{"team-a", "argocd"}, []string{"team-a/team-appset", "argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}},
		{[]string{AllNamespaces}, []string{"team-a/team-appset", "argocd/acme", "argocd/nested", "argocd/pending", "argocd/pending"}},
		{[]string{"empty"}, nil},
	} {
		w := newWorld()
		_, err := w.trigger(t, func(c *Config) { c.Namespaces = tt.namespaces }).Refresh(context.Background(), "test")
		require.NoError(t, err)
		assert.ElementsMatch(t, tt.want, w.patched(), "%v", tt.namespaces)
	}
}

func TestRefreshDryRunPatchesNothing(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t, func(c *Config) { c.DryRun = true })
	res, err := tr.Refresh(context.Background(), "test")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{OutcomeDryRun: 3}, res.Outcomes)
	assert.Empty(t, w.patched(), "dry run writes nothing")
	assert.Empty(t, w.annotations(t, "argocd", "acme"))
}

// TestRefreshPastTheFencePatchesNothing: a leader frozen past its lease
// wakes up with its context not cancelled yet; lease.Check, right before
// each patch, stops every one.
func TestRefreshPastTheFencePatchesNothing(t *testing.T) {
	w := newWorld()
	tr := w.trigger(t)
	deposed := lease.WithDeadline(context.Background(), time.Now().Add(-time.Second), nil)
	res, err := tr.Refresh(deposed, "test")
	require.Error(t, err)
	assert.Equal(t, map[string]int{OutcomeFailed: 3}, res.Outcomes)
	assert.Empty(t, w.patched(), "a deposed leader patches nothing")
}

func TestRefreshFailuresAndVanishedApplicationSets(t *testing.T) {
	w := newWorld()
	w.dyn.PrependReactor("patch", "applicationsets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		switch a.(k8stesting.PatchAction).GetName() {
		case "acme":
			return true, nil, apierrors.NewInternalError(errors.New("etcd is unhappy"))
		case "nested":
			return true, nil, apierrors.NewNotFound(ApplicationSets.GroupResource(), "nested")
		}
		return false, nil, nil
	})
	tr := w.trigger(t)
	res, err := tr.Refresh(context.Background(), "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "patch applicationset argocd/acme")
	assert.NotContains(t, err.Error(), "nested", "deleted meanwhile is not an error")
	assert.Equal(t, map[string]int{OutcomeFailed: 1, OutcomeGone: 1, OutcomeRepatched: 1}, res.Outcomes)
	assert.Equal(t, "true", w.annotations(t, "argocd", "pending")[AnnotationRefresh], "one failure does not stop the others")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.patches.WithLabelValues(OutcomeFailed)))
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("error")))
}

func TestRefreshListErrorNamesTheNamespace(t *testing.T) {
	w := newWorld()
	w.dyn.PrependReactor("list", "applicationsets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(ApplicationSets.GroupResource(), "")
	})
	tr := w.trigger(t)
	tr.syncTimeout = 200 * time.Millisecond
	_, err := tr.Refresh(context.Background(), "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "list applicationsets in namespace argocd")
	assert.Contains(t, err.Error(), "CRD installed?")
	assert.Empty(t, w.patched(), "an unsynced cache patches nothing")
}

// TestConfigValidate: every problem at once, each with its path, as the
// configuration loader and New report them.
func TestConfigValidate(t *testing.T) {
	ok := Config{PluginConfigMap: plugin, Namespaces: []string{"argocd"}, Debounce: time.Second}
	require.Empty(t, ok.Validate(nil))
	bad := Config{PluginConfigMap: "Not_A_Name", Namespaces: []string{"argocd", "*", "Bad_NS"}, Debounce: 0, RetryAfter: -time.Second}
	var got []string
	for _, e := range bad.Validate(field.NewPath("applicationSetRefresh")) {
		got = append(got, e.Error())
	}
	assert.Equal(t, []string{
		`applicationSetRefresh.pluginConfigMap: Invalid value: "Not_A_Name": not a ConfigMap name`,
		`applicationSetRefresh.namespaces[1]: Invalid value: "*": every namespace: must be the only entry`,
		`applicationSetRefresh.namespaces[2]: Invalid value: "Bad_NS": not a namespace name`,
		`applicationSetRefresh.debounce: Invalid value: "0s": must be above 0`,
		`applicationSetRefresh.retryAfter: Invalid value: "-1s": must be at least 0`,
	}, got)
	assert.Equal(t, "applicationSetRefresh.namespaces: Required value: at least one, or *",
		(&Config{PluginConfigMap: plugin, Debounce: time.Second}).Validate(field.NewPath("applicationSetRefresh")).ToAggregate().Error())
}

func TestRunWaitsForAListingThenDebounces(t *testing.T) {
	w := newWorld()
	w.inv.version = 0 // nothing listed yet: Argo CD would get a 503, nothing to refresh
	// the burst's changes come back to back: spaced, a slow machine could
	// stretch it past the debounce and rightly make two passes
	tr := w.trigger(t, func(c *Config) { c.Debounce = 500 * time.Millisecond })
	stop := run(tr.Run)
	defer stop()

	time.Sleep(300 * time.Millisecond)
	assert.Zero(t, passes(tr), "no pass before the first snapshot")

	for range 5 { // a burst of changes
		w.inv.change()
	}
	require.Eventually(t, func() bool { return passes(tr) == 1 }, 5*time.Second, 10*time.Millisecond)
	time.Sleep(time.Second)
	assert.Equal(t, 1, passes(tr), "a burst makes one pass")

	for i := 2; i <= 4; i++ {
		w.inv.change()
		require.Eventually(t, func() bool { return passes(tr) == i }, 5*time.Second, 10*time.Millisecond)
	}
	assert.Equal(t, 1, w.lists(), "the informer listed ApplicationSets once; the passes read its cache")
}

func TestRunRetriesAFailedPass(t *testing.T) {
	w := newWorld()
	w.failOnce("patch")
	tr := w.trigger(t)
	stop := run(tr.Run)
	defer stop()
	require.Eventually(t, func() bool { return testutil.ToFloat64(tr.metrics.passes.WithLabelValues("success")) == 1 }, 2*time.Second, 10*time.Millisecond,
		"the pass at start failed and was tried again without any change")
	assert.Equal(t, 1.0, testutil.ToFloat64(tr.metrics.passes.WithLabelValues("error")))
}

func TestRunWaitsForTheCache(t *testing.T) {
	w := newWorld()
	w.failOnce("list")
	tr := w.trigger(t)
	tr.syncTimeout = 10 * time.Second
	stop := run(tr.Run)
	defer stop()
	// the pass is counted after its last patch
	require.Eventually(t, func() bool { return len(w.patched()) == 4 && passes(tr) == 1 }, 10*time.Second, 10*time.Millisecond,
		"the pass at start waits for the informer's listing, which is tried again")
	assert.Equal(t, 1, passes(tr), "one pass, once the cache synced")
}

// TestRefreshFromACacheThatLagsOurPatch: a cached copy older than our last
// patch may still carry the annotation (Argo CD has not reconciled the
// ApplicationSet yet): the next pass removes and sets it again, as for a
// copy that shows it. Once the cache shows that version or a later one, or
// no longer holds the ApplicationSet, the patch is forgotten.
func TestRefreshFromACacheThatLagsOurPatch(t *testing.T) {
	version := func(rv string) *unstructured.Unstructured {
		u := appSet("argocd", "acme", []any{pluginGen(plugin)}, nil)
		u.SetResourceVersion(rv)
		return u
	}
	for _, tc := range []struct {
		name    string
		cached  []*unstructured.Unstructured
		outcome string
	}{
		{name: "the cache does not show our patch", cached: []*unstructured.Unstructured{version("9")}, outcome: OutcomeRepatched},
		{name: "the cache shows it", cached: []*unstructured.Unstructured{version("10")}, outcome: OutcomePatched},
		{name: "the cache shows a later version", cached: []*unstructured.Unstructured{version("11")}, outcome: OutcomePatched},
		{name: "deleted since", outcome: OutcomePatched},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld()
			w.dyn.PrependReactor("patch", "applicationsets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, version("10"), nil // the version our patch made
			})
			tr := w.trigger(t)
			ctx := context.Background()
			outcome, err := tr.patch(ctx, version("9"))
			require.NoError(t, err)
			require.Equal(t, OutcomePatched, outcome)
			require.Equal(t, map[string]string{"argocd/acme": "10"}, tr.patched)

			tr.forgetShownPatches(tc.cached)
			a := version("9")
			if len(tc.cached) > 0 {
				a = tc.cached[0]
			}
			outcome, err = tr.patch(ctx, a)
			require.NoError(t, err)
			assert.Equal(t, tc.outcome, outcome)
		})
	}
}
