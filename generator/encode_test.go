package generator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/sources/inventory"
)

// marshalAnswer is the reference answer: the ready clusters f matches,
// encoded at once with json.Marshal, as answers were before each cluster
// was encoded separately.
func marshalAnswer(t testing.TB, snap *inventory.Snapshot, f *Filter) []byte {
	t.Helper()
	var resp response
	resp.Output.Parameters = []Parameters{}
	for i := range snap.Clusters {
		if c := snap.Clusters[i]; c.Ready && f.Match(c) {
			resp.Output.Parameters = append(resp.Output.Parameters, ClusterParameters(c))
		}
	}
	b, err := json.Marshal(&resp)
	require.NoError(t, err)
	return b
}

// escapingInventory has clusters whose values json.Marshal escapes (HTML
// characters, quotes, backslashes, U+2028, invalid UTF-8), not-ready
// clusters between ready ones, and one cluster larger than WriteTo's
// scratch buffer.
func escapingInventory(t testing.TB) *inventory.Inventory {
	t.Helper()
	c := func(name, tenant, env string, ready bool) sources.Cluster {
		cl := testCluster(name, tenant)
		cl.Ready = ready
		cl.Region = "eu-west-1"
		if env != "" {
			cl.Labels["env"] = env
		}
		return cl
	}
	cs := []sources.Cluster{
		c("a-acme-1", "acme", "prod", true),
		c("b-acme-2", "acme", "prod", false),
		c("c-acme-3", "acme", "dev", true),
		c("d-globex-1", "globex", "prod", true),
		c("e-globex-2", "globex", "dev", false),
		c("f-initech-1", "initech", "prod", true),
		c("g-acme-4", "acme", "prod", true),
		c("h-big", "big", "dev", true),
		c("i-globex-3", "globex", "prod", true),
		c("j-Ünïcödé", "initech", "dev", true),
	}
	cs[0].Labels["tier"] = `<web> & "api"`
	cs[0].Annotations = map[string]string{"note": "ü ☃ \u2028 'q' \\ </script>", "bad": "\xff\xfe"}
	cs[3].Project = `a&b<c>`
	cs[5].Labels = nil
	cs[7].Annotations = map[string]string{"blob": strings.Repeat("<&>", scratchSize/3+100)}
	cs[9].KubernetesVersion = "v1.31\t\"rc\""
	return inventoryOf(t, &scripted{steps: []func() ([]sources.Cluster, error){ok(cs...)}})
}

// TestAnswerEqualsMarshal checks every way an answer is written against
// json.Marshal of the response: wrong runs, commas, escaping or framing
// would differ.
func TestAnswerEqualsMarshal(t *testing.T) {
	small, large := escapingInventory(t), syntheticInventory(t, 1000)
	cases := []struct {
		name   string
		inv    *inventory.Inventory
		params string
		count  int
	}{
		{"all", small, `{}`, 8},
		{"none", small, `{"tenant":"nobody"}`, 0},
		{"only not ready", small, `{"nameRegex":"^(b|e)-"}`, 0},
		{"contiguous across a not-ready cluster", small, `{"nameRegex":"^[a-c]-"}`, 2},
		{"scattered", small, `{"labelSelector":"env=prod"}`, 4},
		{"first", small, `{"nameRegex":"^a-"}`, 1},
		{"last", small, `{"nameRegex":"^j-"}`, 1},
		{"larger than the scratch buffer", small, `{"tenant":["big","globex"]}`, 3},
		{"large all", large, `{}`, 1000},
		{"large contiguous", large, `{"tenant":"globex"}`, 333},
		{"large scattered", large, `{"labelSelector":"shard=0"}`, 334},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			snap := tc.inv.Snapshot()
			var params map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(tc.params), &params))
			f, err := ParseParameters(params, knownProviders())
			require.NoError(t, err)
			want := marshalAnswer(t, snap, &f)

			res, err := Render(snap, &f)
			require.NoError(t, err)
			assert.Equal(t, tc.count, res.Count)
			assert.Equal(t, string(want), string(res.Bytes()))
			assert.Equal(t, len(want), res.Len())
			var buf bytes.Buffer
			n, err := res.WriteTo(&buf)
			require.NoError(t, err)
			assert.Equal(t, int64(len(want)), n)
			assert.Equal(t, string(want), buf.String())

			h := newServer(t, tc.inv).Handler()
			body := []byte(`{"applicationSetName":"x","input":{"parameters":` + tc.params + `}}`)
			for _, try := range []string{"encoded", "cached"} {
				rec := do(h, rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken))
				require.Equal(t, http.StatusOK, rec.Code, try)
				assert.Equal(t, string(want), rec.Body.String(), try)
			}
		})
	}
}

// recordingWriter keeps the size of each write and fails after failAfter
// writes when it is set.
type recordingWriter struct {
	bytes.Buffer
	sizes     []int
	failAfter int
}

func (w *recordingWriter) Write(p []byte) (int, error) {
	if w.failAfter > 0 && len(w.sizes) == w.failAfter {
		return 0, errors.New("connection reset")
	}
	w.sizes = append(w.sizes, len(p))
	return w.Buffer.Write(p)
}

func TestWriteToChunks(t *testing.T) {
	render := func(inv *inventory.Inventory, params map[string]json.RawMessage) Result {
		f, err := ParseParameters(params, knownProviders())
		require.NoError(t, err)
		res, err := Render(inv.Snapshot(), &f)
		require.NoError(t, err)
		return res
	}

	t.Run("small runs are gathered", func(t *testing.T) {
		res := render(syntheticInventory(t, 1000), map[string]json.RawMessage{ParamLabelSelector: []byte(`"shard=0"`)})
		var w recordingWriter
		_, err := res.WriteTo(&w)
		require.NoError(t, err)
		require.Greater(t, len(w.sizes), 1, "the answer is over one scratch buffer")
		for _, n := range w.sizes[:len(w.sizes)-1] {
			assert.LessOrEqual(t, n, scratchSize)
			assert.Greater(t, n, scratchSize-1000, "each write but the last fills the buffer up to a cluster")
		}
		assert.Equal(t, res.Bytes(), w.Bytes())
	})

	t.Run("every cluster is one write of the whole encoding", func(t *testing.T) {
		res := render(syntheticInventory(t, 1000), nil)
		var w recordingWriter
		_, err := res.WriteTo(&w)
		require.NoError(t, err)
		assert.Equal(t, []int{res.Len()}, w.sizes)
		assert.Equal(t, res.Bytes(), w.Bytes())
	})

	t.Run("a long run is written at once", func(t *testing.T) {
		res := render(syntheticInventory(t, 1000), map[string]json.RawMessage{ParamTenant: []byte(`"globex"`)})
		var w recordingWriter
		_, err := res.WriteTo(&w)
		require.NoError(t, err)
		assert.Equal(t, []int{len(answerPrefix), res.Len() - len(answerPrefix) - len(answerSuffix), len(answerSuffix)}, w.sizes)
		assert.Equal(t, res.Bytes(), w.Bytes())
	})

	t.Run("an error stops the writes", func(t *testing.T) {
		res := render(syntheticInventory(t, 1000), map[string]json.RawMessage{ParamLabelSelector: []byte(`"shard=0"`)})
		w := recordingWriter{failAfter: 1}
		n, err := res.WriteTo(&w)
		require.EqualError(t, err, "connection reset")
		assert.Equal(t, int64(w.Len()), n)
		assert.Len(t, w.sizes, 1)
	})

	t.Run("the zero Result is the empty answer", func(t *testing.T) {
		var res Result
		assert.Equal(t, `{"output":{"parameters":[]}}`, string(res.Bytes())) //nolint:testifylint // the exact bytes are the contract
		n, err := res.WriteTo(io.Discard)
		require.NoError(t, err)
		assert.Equal(t, int64(res.Len()), n)
	})
}

// TestCachedAnswerAllocations: a cached answer allocates per request only
// what it did when answers were cached as bytes (2: the request body's
// size limit and echo's), whether it is one run or thousands.
func TestCachedAnswerAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops sync.Pool items at random")
	}
	h := newServer(t, syntheticInventory(t, 10000)).Handler()
	for name, params := range map[string]string{"all": `{}`, "scattered": `{"labelSelector":"shard=0"}`} {
		t.Run(name, func(t *testing.T) {
			body := []byte(`{"applicationSetName":"x","input":{"parameters":` + params + `}}`)
			req := rawRequest(http.MethodPost, GetParamsPath, body, "Bearer "+demoToken)
			rd := bytes.NewReader(body)
			req.Body = io.NopCloser(rd)
			w := &discardWriter{h: http.Header{}}
			serve := func() {
				rd.Reset(body)
				clear(w.h)
				h.ServeHTTP(w, req)
			}
			serve() // encode and cache
			require.Equal(t, http.StatusOK, w.code)
			assert.LessOrEqual(t, testing.AllocsPerRun(100, serve), 2.0)
		})
	}
}
