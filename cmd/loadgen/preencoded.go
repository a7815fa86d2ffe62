package main

import (
	"bytes"
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"
)

// The follower against pre-encoded bytes: its answers to the inputs of the
// mix, captured byte for byte, are served by a bare net/http server in
// loadgen's own process (a map lookup on the request body, the bytes
// written as they are), and that server gets the same load as the
// follower: same connections, duration and inputs, every answer checked
// by content as the follower's were. The throughput of the two is the
// follower's slowdown against the least a server can do per request.

// capturedAnswer is one answer of the service as it sent it.
type capturedAnswer struct {
	body        []byte
	contentType string
	// sized is whether the service sent a Content-Length: net/http sets
	// one for a small answer and streams a larger one chunked (the
	// service sets none itself), and the pre-encoded server does the same.
	sized bool
}

// maxPreEncodedBody bounds a request body the pre-encoded server reads.
const maxPreEncodedBody = 1 << 20

// captureAnswers asks base each input once and keeps its answer, which
// must be the one verify recorded for it: status 200, the same size and
// CRC-32C.
func captureAnswers(ctx context.Context, base, token string, ins []*input) (map[string]capturedAnswer, error) {
	var dials atomic.Int64
	c, tr := newConn(&dials)
	defer tr.CloseIdleConnections()
	out := make(map[string]capturedAnswer, len(ins))
	for _, in := range ins {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+getParamsPath, bytes.NewReader(in.body))
		if err != nil {
			return nil, fmt.Errorf("capture %s: %w", bytes.TrimSpace(in.body), err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			return nil, fmt.Errorf("capture %s: %w", bytes.TrimSpace(in.body), err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		switch {
		case err != nil:
			return nil, fmt.Errorf("capture %s: %w", bytes.TrimSpace(in.body), err)
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("capture %s: status %d", bytes.TrimSpace(in.body), resp.StatusCode)
		case len(body) != in.size || crc32.Checksum(body, castagnoli) != in.sum:
			return nil, fmt.Errorf("capture %s: answer of %d bytes (CRC-32C %08x), not the verified one (%d bytes, %08x)",
				bytes.TrimSpace(in.body), len(body), crc32.Checksum(body, castagnoli), in.size, in.sum)
		}
		out[string(in.body)] = capturedAnswer{body: body, contentType: resp.Header.Get("Content-Type"), sized: resp.ContentLength >= 0}
	}
	return out, nil
}

// preEncodedHandler answers a POST of getParamsPath with the answer
// captured for its body, as the service sent it: its Content-Type, and a
// Content-Length when the service sent one. An unknown body is a 404, a
// body that cannot be read a 400, another path a 404 and another method
// a 405.
func preEncodedHandler(answers map[string]capturedAnswer) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != getParamsPath {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxPreEncodedBody))
		if err != nil {
			http.Error(w, "cannot read request body", http.StatusBadRequest)
			return
		}
		a, ok := answers[string(body)]
		if !ok {
			http.Error(w, "no answer captured for this body", http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		if a.sized {
			h.Set("Content-Length", strconv.Itoa(len(a.body)))
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(a.body)
	})
}

// serveLoopback serves h on a free loopback port and returns its base
// URL and how to stop it.
func serveLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln) // http.ErrServerClosed once stopped
	}()
	return "http://" + ln.Addr().String(), func() { _ = srv.Close(); <-done }, nil
}

// measurePreEncoded captures the follower's answers at base, serves them
// from a bare server in this process and drives the same load as the
// follower's on it, into fr; a failure is kept as fr.PreEncodedError.
func (fr *followerResult) measurePreEncoded(ctx context.Context, o options, base string, ins []*input) {
	answers, err := captureAnswers(ctx, base, token, ins)
	if err != nil {
		fr.PreEncodedError = err.Error()
		return
	}
	preBase, stop, err := serveLoopback(preEncodedHandler(answers))
	if err != nil {
		fr.PreEncodedError = err.Error()
		return
	}
	defer stop()
	load := drive(preBase, token, ins, o.conns, o.duration)
	slices.Sort(load.all)
	fr.PreEncodedRequests, fr.PreEncodedErrors = load.Requests, load.errors()
	fr.PreEncodedThroughput, fr.PreEncodedP50 = float64(load.Requests)/load.Elapsed.Seconds(), quantile(load.all, 0.5)
	if load.firstError != "" {
		fr.PreEncodedError = "under load: " + load.firstError
	}
	if fr.Throughput > 0 {
		fr.PreEncodedRatio = fr.PreEncodedThroughput / fr.Throughput
	}
}
