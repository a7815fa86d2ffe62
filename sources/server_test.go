package sources_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

func TestNormalizeServer(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    string
		wantErr string // substring of the error; empty means success
	}{
		// Accepted, returned without trailing slashes and otherwise verbatim.
		{name: "plain https", in: "https://k8s.example.com", want: "https://k8s.example.com"},
		{name: "plain http", in: "http://10.0.0.1:8080", want: "http://10.0.0.1:8080"},
		{name: "one trailing slash", in: "https://k8s.example.com/", want: "https://k8s.example.com"},
		{name: "several trailing slashes", in: "https://k8s.example.com///", want: "https://k8s.example.com"},
		{name: "host case preserved", in: "https://ACMEPRODEU.gr7.eu-west-1.eks.Example.com", want: "https://ACMEPRODEU.gr7.eu-west-1.eks.Example.com"},
		{name: "scheme case preserved", in: "HTTPS://k8s.example.com/", want: "HTTPS://k8s.example.com"},
		{name: "port preserved", in: "https://k8s.example.com:443/", want: "https://k8s.example.com:443"},
		{name: "non default port preserved", in: "https://k8s.example.com:6443", want: "https://k8s.example.com:6443"},
		{name: "path kept, trailing slash trimmed", in: "https://rancher.example.com/k8s/clusters/c-m-ab12cd/", want: "https://rancher.example.com/k8s/clusters/c-m-ab12cd"},
		{name: "path case preserved", in: "https://rancher.example.com/K8S/Clusters/C-1", want: "https://rancher.example.com/K8S/Clusters/C-1"},
		{name: "ipv6 host with port", in: "https://[2001:db8::1]:6443/", want: "https://[2001:db8::1]:6443"},
		{name: "surrounding whitespace trimmed", in: "  https://k8s.example.com/ \n", want: "https://k8s.example.com"},

		// Rejected.
		{name: "space before a trailing slash", in: "https://k8s.example.com/ /", wantErr: "must not contain whitespace"},
		{name: "space in the path", in: "https://rancher.example.com/k8s/clusters/c 1", wantErr: "must not contain whitespace"},
		{name: "empty", in: "", wantErr: "scheme must be https or http"},
		{name: "only whitespace", in: "   ", wantErr: "scheme must be https or http"},
		{name: "no scheme", in: "k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "no scheme with port", in: "k8s.example.com:6443", wantErr: "scheme must be https or http"},
		{name: "scheme relative", in: "//k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "ftp scheme", in: "ftp://k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "websocket scheme", in: "wss://k8s.example.com", wantErr: "scheme must be https or http"},
		{name: "file scheme", in: "file:///etc/kubernetes/admin.conf", wantErr: "scheme must be https or http"},
		{name: "mailto scheme", in: "mailto:ops@example.com", wantErr: "scheme must be https or http"},
		{name: "scheme only", in: "https://", wantErr: "no host"},
		{name: "scheme only with slashes", in: "https:///", wantErr: "no host"},
		{name: "path without host", in: "https:///k8s/clusters/c-1", wantErr: "no host"},
		{name: "opaque https", in: "https:k8s.example.com", wantErr: "no host"},
		{name: "user only", in: "https://admin@k8s.example.com", wantErr: "user info"},
		{name: "user and password", in: "https://admin:hunter2@k8s.example.com", wantErr: "user info"},
		{name: "empty user info", in: "https://@k8s.example.com", wantErr: "user info"},
		{name: "query", in: "https://k8s.example.com?timeout=5s", wantErr: "must not have a query or fragment"},
		{name: "query after path", in: "https://k8s.example.com/api?x=1", wantErr: "must not have a query or fragment"},
		{name: "fragment", in: "https://k8s.example.com/#frag", wantErr: "must not have a query or fragment"},
		{name: "invalid port", in: "https://k8s.example.com:port", wantErr: "invalid server url"},
		{name: "space in host", in: "https://k8s example.com", wantErr: "invalid server url"},
		{name: "bad escape", in: "https://k8s.example.com/%zz", wantErr: "invalid server url"},
		{name: "control character", in: "https://k8s.example.com/\x7f", wantErr: "invalid server url"},
		{name: "garbage", in: ":::://???", wantErr: "invalid server url"},

		// The doc promises "an absolute http(s) URL with a host" and "no
		// query or fragment". These three are accepted today (see report).
		{name: "port without host name", in: "https://:6443", wantErr: "no host"},
		{name: "empty query marker", in: "https://k8s.example.com?", wantErr: "must not have a query or fragment"},
		{name: "empty fragment marker", in: "https://k8s.example.com#", wantErr: "must not have a query or fragment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := sources.NormalizeServer(tt.in)
			if tt.wantErr != "" {
				require.Error(t, err, "accepted as %q", got)
				assert.Contains(t, err.Error(), tt.wantErr)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			again, err := sources.NormalizeServer(got)
			require.NoError(t, err, "normalized form must be accepted again")
			assert.Equal(t, got, again, "normalization must be idempotent")
		})
	}
}

func TestNormalizeServerDoesNotLeakPassword(t *testing.T) {
	_, err := sources.NormalizeServer("https://admin:hunter2@k8s.example.com")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "hunter2")
}

func TestNormalizeServerErrorsNeverQuoteTheURL(t *testing.T) {
	for _, in := range []string{
		"https://u:pa ss@h.example.com", // parse error
		"ftp://u:secret-pw@h.example.com",
		"https://h.example.com?token=secret-pw",
		"https://h.example.com/secret-pw#x",
	} {
		_, err := sources.NormalizeServer(in)
		require.Error(t, err, in)
		assert.NotContains(t, err.Error(), "secret-pw", in)
		assert.NotContains(t, err.Error(), "pa ss", in)
	}
}

// TestServerKey: the spellings of one server share a key; other servers
// do not.
func TestServerKey(t *testing.T) {
	same := []string{"https://api.example.com", "https://API.example.com.", "https://api.example.com:443/", "HTTPS://api.example.com",
		"https://api.example.com:0443"}
	for _, s := range same {
		assert.Equal(t, "https://api.example.com", sources.ServerKey(s), s)
	}
	assert.Equal(t, "https://rancher.example.com/k8s/clusters/c-1", sources.ServerKey("https://Rancher.example.com:443/k8s/clusters/c-1/"))
	assert.Equal(t, "https://[::1]", sources.ServerKey("https://[::1]:443"))
	assert.Equal(t, "https://api.example.com:6443", sources.ServerKey("https://api.example.com:006443"))
	for _, other := range []string{"https://api.example.com:6443", "http://api.example.com", "https://api.example.com/k8s/clusters/c-1"} {
		assert.NotEqual(t, sources.ServerKey("https://api.example.com"), sources.ServerKey(other), other)
	}
}
