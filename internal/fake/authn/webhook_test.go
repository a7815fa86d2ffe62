package authn_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/authn"
	fakeaws "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/aws"
)

// reviewer posts TokenReviews to the webhook as kube-apiserver does: to
// the server of the kubeconfig-shaped file, trusting its CA, read by
// client-go's clientcmd.
func reviewer(t *testing.T, w *authn.Webhook) func(token string) authenticationv1.TokenReviewStatus {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", w.ConfigFile())
	require.NoError(t, err)
	client, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	return func(token string) authenticationv1.TokenReviewStatus {
		t.Helper()
		body, err := json.Marshal(authenticationv1.TokenReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenReview"},
			Spec:     authenticationv1.TokenReviewSpec{Token: token}})
		require.NoError(t, err)
		resp, err := client.Post(cfg.Host, "application/json", bytes.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out authenticationv1.TokenReview
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		assert.Equal(t, "TokenReview", out.Kind)
		return out.Status
	}
}

// TestWebhookServesTokenReviews: the webhook Start serves answers the
// TokenReviews of a client that reaches it through its config file, as
// kube-apiserver does, with the user of a token it accepts, and records
// one decision per review; routed, it judges a token as the named cluster
// only.
func TestWebhookServesTokenReviews(t *testing.T) {
	w, err := authn.Start(t.TempDir())
	require.NoError(t, err)
	defer w.Close()
	sts := fakeaws.NewSTS()
	sts.Issue(keyID, issued)
	restore := w.TrustEKS(stsCaller(sts), "another-cluster", eksCluster)
	review := reviewer(t, w)
	token := presignToken{key: keyID, secret: issued.Secret, session: issued.SessionToken,
		host: authn.STSHost(region), region: region, cluster: eksCluster, expires: "60", at: time.Now()}.token(t)

	ok := review(token)
	assert.True(t, ok.Authenticated)
	assert.Equal(t, authenticationv1.UserInfo{Username: roleARN, UID: "aws-iam-authenticator:" + roleARN,
		Groups: []string{"e2e-eks:e2e-eks-deployer"}}, ok.User)
	assert.False(t, review("e2e-plain-token").Authenticated)

	unroute := w.RouteBy(func(string) (string, bool) { return "another-cluster", true })
	assert.False(t, review(token).Authenticated, "a token for %s, presented at another cluster", eksCluster)
	unroute()
	restore()
	assert.False(t, review(token).Authenticated, "trusting no EKS cluster")

	seen := w.Seen()
	require.Len(t, seen, 4)
	assert.Equal(t, "authenticated "+roleARN+" at "+eksCluster, seen[0])
	assert.Equal(t, "unauthenticated: "+authn.ErrNotCloudToken.Error(), seen[1])
	assert.Contains(t, seen[2], "signature does not match (another x-k8s-aws-id than another-cluster")
	assert.Equal(t, "unauthenticated: "+authn.ErrNoEKSCluster.Error(), seen[3])
}
