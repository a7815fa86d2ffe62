package tokenbindings

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

var cfg *rest.Config

func TestMain(m *testing.M) { testenv.Main(m, "../..", &cfg) }

// setup creates namespace ns and the Secrets, each with the labels and
// annotations given.
func setup(t *testing.T, ns string, secrets map[string][2]map[string]string) {
	t.Helper()
	kc, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	ctx := context.Background()
	_, err = kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) { // a namespace is never deleted: envtest runs no namespace controller
		require.NoError(t, err)
	}
	for name, la := range secrets {
		_, err := kc.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: la[0], Annotations: la[1]},
			Data:       map[string][]byte{sources.TokenBindingKey: []byte("not-read-" + name)},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { // so that the test can run again (-count) in the package's apiserver
			assert.NoError(t, kc.CoreV1().Secrets(ns).Delete(context.Background(), name, metav1.DeleteOptions{}))
		})
	}
}

func bound(provider, id string) [2]map[string]string {
	return [2]map[string]string{{sources.LabelTokenBinding: provider}, {sources.AnnotationTokenBinding: id}}
}

func TestBound(t *testing.T) {
	const a = "/subscriptions/S/resourceGroups/RG/providers/Microsoft.RedHatOpenShift/openShiftClusters/A"
	const b = "/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/b"
	setup(t, "argocd", map[string][2]map[string]string{
		"token-a":       bound("aro", a),
		"token-b1":      bound("aro", b),
		"token-b2":      bound("aro", "  "+b+"\n"), // two claim b: both are returned
		"token-other":   bound("aks", a),           // another provider's
		"no-annotation": {{sources.LabelTokenBinding: "aro"}, nil},
		"no-label":      {nil, {sources.AnnotationTokenBinding: a}},
	})
	setup(t, "elsewhere", map[string][2]map[string]string{"token-a-elsewhere": bound("aro", a)})

	for _, page := range []int64{500, 1} {
		t.Run(fmt.Sprintf("page size %d", page), func(t *testing.T) {
			l := New(func() (*rest.Config, error) { return cfg, nil }, "argocd")
			l.pageSize = page
			got, err := l.Bound(context.Background(), sources.ProviderARO)
			require.NoError(t, err)
			assert.Equal(t, map[string][]string{
				"/subscriptions/s/resourcegroups/rg/providers/microsoft.redhatopenshift/openshiftclusters/a": {"token-a"},
				b: {"token-b1", "token-b2"},
			}, got)

			ref, err := sources.BoundToken(got, a)
			require.NoError(t, err)
			assert.Equal(t, "secret:token-a/token", ref.String())
			_, err = sources.BoundToken(got, b)
			assert.EqualError(t, err, "2 token Secrets are bound to it (token-b1, token-b2): keep one")
			_, err = sources.BoundToken(got, "/subscriptions/s/x")
			assert.ErrorContains(t, err, "no token Secret: create one labelled "+sources.LabelTokenBinding)
		})
	}
}

func TestBoundErrors(t *testing.T) {
	t.Run("no Kubernetes API", func(t *testing.T) {
		calls := 0
		l := New(func() (*rest.Config, error) {
			calls++
			return nil, errors.New("in-cluster kubernetes config: not in a cluster")
		}, "argocd")
		for range 2 {
			_, err := l.Bound(context.Background(), sources.ProviderARO)
			assert.EqualError(t, err, "token bindings: in-cluster kubernetes config: not in a cluster")
		}
		assert.Equal(t, 1, calls, "the client is made once")
	})
	t.Run("refused", func(t *testing.T) {
		c := rest.CopyConfig(cfg)
		c.BearerToken, c.CertData, c.KeyData, c.CertFile, c.KeyFile = "not-a-valid-token", nil, nil, "", ""
		l := New(func() (*rest.Config, error) { return c, nil }, "argocd")
		got, err := l.Bound(context.Background(), sources.ProviderARO)
		require.Error(t, err)
		assert.Nil(t, got)
		assert.Contains(t, err.Error(), "token bindings: list secrets in argocd: ")
		assert.NotContains(t, err.Error(), "not-a-valid-token")
	})
}
