package rancher

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	fakerancher "github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/fake/rancher"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
)

// The shared fake Rancher (internal/fake/rancher) as the listing tests use
// it, and a source's configuration for it.

// fixturesDir holds the upstream-shaped Rancher fixtures.
var fixturesDir = filepath.Join("..", "..", "testdata", "fixtures", "rancher")

// testToken has the shape of a Rancher token; tests check it never appears
// in errors.
const testToken = "token-abcde:sEcReTvAlUe5bcdfghjklmnpqrstvwxz2456789bcdfghjklmnpqrs"

// fakeRancher is the shared fake with testToken its API token and every
// request recorded (TakeRequests), over TLS when asked; its errors fail the
// test.
type fakeRancher struct {
	*fakerancher.Fake
	t testing.TB
}

func newFake(t testing.TB, tls bool) *fakeRancher {
	t.Helper()
	opts := []fakerancher.Option{fakerancher.WithRecording()}
	if tls {
		opts = append(opts, fakerancher.WithTLS())
	}
	f, err := fakerancher.New(fixturesDir, testToken, opts...)
	require.NoError(t, err)
	t.Cleanup(f.Close)
	return &fakeRancher{Fake: f, t: t}
}

func (f *fakeRancher) putRaw(raw []byte)      { f.t.Helper(); require.NoError(f.t, f.PutRaw(raw)) }
func (f *fakeRancher) put(obj map[string]any) { f.t.Helper(); require.NoError(f.t, f.PutObject(obj)) }

func (f *fakeRancher) edit(id string, change func(c map[string]any)) {
	f.t.Helper()
	require.NoError(f.t, f.Edit(id, change))
}

func (f *fakeRancher) remove(id string) {
	f.t.Helper()
	_, err := f.ClusterObject(id)
	require.NoError(f.t, err)
	f.Remove(id)
}

// setCondition and dropCondition change a cluster object's condition typ.
func setCondition(c map[string]any, typ, status string) {
	fakerancher.SetConditions(c, fakerancher.Condition{Type: typ, Status: status})
}

func dropCondition(c map[string]any, typ string) {
	fakerancher.SetConditions(c, fakerancher.Condition{Type: typ})
}

// paths counts requests by path.
func paths(reqs []fakerancher.Request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		out[r.Path]++
	}
	return out
}

// writeToken writes a token file and returns its path.
func writeToken(t testing.TB, dir, token string) string {
	t.Helper()
	p := filepath.Join(dir, "token")
	require.NoError(t, os.WriteFile(p, []byte(token+"\n"), 0o600))
	return p
}

// config is a source configuration for f with a token file.
func config(t testing.TB, f *fakeRancher) Config {
	return Config{URL: f.URL(), Token: sources.SecretRef{File: writeToken(t, t.TempDir(), testToken)}}
}
