package main

import (
	"bytes"
	"context"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeService answers each input's body with answers[body] (status 200,
// application/json, no Content-Length of its own, as the service), and
// records the verified size and CRC-32C of each answer into its input.
func fakeService(t *testing.T, ins []*input, answer func(*input) []byte) *httptest.Server {
	t.Helper()
	answers := map[string][]byte{}
	for _, in := range ins {
		a := answer(in)
		answers[string(in.body)] = a
		in.size, in.sum = len(a), crc32.Checksum(a, castagnoli)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a, ok := answers[string(body)]
		if !ok || r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unknown", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for len(a) > 0 { // in pieces, as the service writes a long answer
			n := min(len(a), 32<<10)
			_, _ = w.Write(a[:n])
			a = a[n:]
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// answerOf is a fake answer: a small one for the tenants, a long one
// (streamed chunked) for the others.
func answerOf(in *input) []byte {
	if in.kind == "tenant" {
		return []byte(`{"output":{"parameters":[{"name":"` + strings.TrimSpace(string(in.body[:20])) + `"}]}}`)
	}
	return bytes.Repeat([]byte(`{"name":"`+in.kind+`-cluster"},`), 20000)
}

// TestPreEncodedServer: the service's answers are captured byte for byte,
// with their framing, and the bare server answers each body with its own,
// and nothing else.
func TestPreEncodedServer(t *testing.T) {
	ins := inputs()
	svc := fakeService(t, ins, answerOf)
	answers, err := captureAnswers(context.Background(), svc.URL, token, ins)
	require.NoError(t, err)
	require.Len(t, answers, len(ins))
	base, stop, err := serveLoopback(preEncodedHandler(answers))
	require.NoError(t, err)
	defer stop()

	for _, in := range ins {
		t.Run("answers "+in.kind+" "+string(bytes.TrimSpace(in.body)), func(t *testing.T) {
			want := answerOf(in)
			resp, err := http.Post(base+getParamsPath, "application/json", bytes.NewReader(in.body))
			require.NoError(t, err)
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, want, got, "the captured bytes")
			assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
			if len(want) < 2048 {
				assert.Equal(t, strconv.Itoa(len(want)), resp.Header.Get("Content-Length"), "sized as the service's small answer")
			} else {
				assert.Equal(t, []string{"chunked"}, resp.TransferEncoding, "streamed as the service's long answer")
			}
		})
	}
	for _, tc := range []struct {
		name, method, path string
		body               string
		want               int
	}{
		{name: "an unknown body", method: http.MethodPost, path: getParamsPath, body: `{"applicationSetName":"other","input":{}}`, want: http.StatusNotFound},
		{name: "an input without its newline", method: http.MethodPost, path: getParamsPath, body: string(bytes.TrimSpace(ins[0].body)), want: http.StatusNotFound},
		{name: "a body too long to read", method: http.MethodPost, path: getParamsPath, body: strings.Repeat("x", maxPreEncodedBody+1), want: http.StatusBadRequest},
		{name: "another path", method: http.MethodPost, path: "/api/v1/other", body: string(ins[0].body), want: http.StatusNotFound},
		{name: "another method", method: http.MethodGet, path: getParamsPath, want: http.StatusMethodNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, tc.want, resp.StatusCode)
		})
	}

	t.Run("driven as the service: every answer checked", func(t *testing.T) {
		load := drive(base, token, ins, 2, 200*time.Millisecond)
		assert.Positive(t, load.Requests)
		assert.Zero(t, load.errors(), load.firstError)
	})
}

// TestCaptureAnswers: only the verified answers are captured.
func TestCaptureAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*input) // after the fake recorded the verified answer
		status int
		want   string
	}{
		{name: "an answer other than the verified one", change: func(in *input) { in.sum++ }, want: "not the verified one"},
		{name: "a status other than 200", status: http.StatusServiceUnavailable, want: "status 503"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ins := inputs()[:1]
			var base string
			if tc.status != 0 {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(tc.status) }))
				defer srv.Close()
				base = srv.URL
			} else {
				base = fakeService(t, ins, func(*input) []byte { return bytes.Repeat([]byte("x"), 96) }).URL
				tc.change(ins[0])
			}
			_, err := captureAnswers(context.Background(), base, token, ins)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
