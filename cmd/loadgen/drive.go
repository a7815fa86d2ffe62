package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

const getParamsPath = "/api/v1/getparams.execute"

// castagnoli is CRC-32C, which the CPU computes at memory speed: every
// answer under load is compared with the verified one by content.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// newConn is a client with exactly one keep-alive connection, counting the
// connections it opens (a count above one means the server closed it).
func newConn(dials *atomic.Int64) (*http.Client, *http.Transport) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
		MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1, IdleConnTimeout: time.Minute, DisableCompression: true,
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, tr
}

func post(ctx context.Context, c *http.Client, base, token string, body []byte, sink io.Writer, buf []byte) (int, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+getParamsPath, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	n, err := io.CopyBuffer(sink, resp.Body, buf)
	return resp.StatusCode, n, err
}

// verify asks each input once, decodes the whole answer and checks that it
// holds exactly the clusters the input selects, each with its own server
// and tenant; it records the answer's size and checksum, which every
// answer under load must then have.
func verify(ctx context.Context, base, token string, ins []*input, fleet []cluster) error {
	var dials atomic.Int64
	c, tr := newConn(&dials)
	defer tr.CloseIdleConnections()
	for _, in := range ins {
		var body bytes.Buffer
		code, n, err := post(ctx, c, base, token, in.body, &body, make([]byte, 32<<10))
		if err != nil {
			return fmt.Errorf("verify %s: %w", in.body, err)
		}
		if code != http.StatusOK {
			return fmt.Errorf("verify %s: status %d: %s", bytes.TrimSpace(in.body), code, body.Bytes())
		}
		var answer struct {
			Output struct {
				Parameters []struct {
					Name   string `json:"name"`
					Server string `json:"server"`
					Tenant string `json:"tenant"`
				} `json:"parameters"`
			} `json:"output"`
		}
		if err := json.Unmarshal(body.Bytes(), &answer); err != nil {
			return fmt.Errorf("verify %s: answer is not JSON: %w", bytes.TrimSpace(in.body), err)
		}
		var want []string
		for i := range fleet {
			if c := &fleet[i]; in.match(c) {
				want = append(want, c.name+" "+c.server+" "+c.tenant)
			}
		}
		slices.Sort(want)
		got := make([]string, 0, len(answer.Output.Parameters))
		for _, p := range answer.Output.Parameters {
			got = append(got, p.Name+" "+p.Server+" "+p.Tenant)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("verify %s: %d clusters answered, %d expected, or not the right ones", bytes.TrimSpace(in.body), len(got), len(want))
		}
		in.want, in.size, in.sum = len(want), int(n), crc32.Checksum(body.Bytes(), castagnoli)
	}
	return nil
}

// loadResult is what the connections measured.
type loadResult struct {
	Requests  int64         `json:"requests"`
	Elapsed   time.Duration `json:"elapsedNs"`
	Non200    int64         `json:"non200"`
	Transport int64         `json:"transportErrors"`
	WrongBody int64         `json:"wrongBody"`
	Dials     int64         `json:"connectionsOpened"`
	Bytes     int64         `json:"bytes"`
	// latencies by input kind, and all together
	byKind map[string][]time.Duration
	all    []time.Duration
	// firstError is the first failure seen, for the report.
	firstError string
}

func (r *loadResult) errors() int64 { return r.Non200 + r.Transport + r.WrongBody }

// drive runs conns connections, each posting the inputs in turn (starting
// at a different one) as fast as answers come, until d has passed. Each
// connection stops at the deadline; a request in flight then is not
// counted.
func drive(base, token string, ins []*input, conns int, d time.Duration) *loadResult {
	var (
		dials                       atomic.Int64
		non200, transport, wrong, n atomic.Int64
		bytesRead                   atomic.Int64
		mu                          sync.Mutex
		res                         = &loadResult{byKind: map[string][]time.Duration{}}
		wg                          sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, tr := newConn(&dials)
			defer tr.CloseIdleConnections()
			buf := make([]byte, 64<<10)
			sum := crc32.New(castagnoli)
			lat := map[string][]time.Duration{}
			for i := w; ctx.Err() == nil; i++ {
				in := ins[i%len(ins)]
				t0 := time.Now()
				sum.Reset()
				code, size, err := post(ctx, c, base, token, in.body, sum, buf)
				took := time.Since(t0)
				if ctx.Err() != nil {
					break // cut by the deadline
				}
				n.Add(1)
				bytesRead.Add(size)
				lat[in.kind] = append(lat[in.kind], took)
				var fail string
				switch {
				case err != nil:
					transport.Add(1)
					fail = err.Error()
				case code != http.StatusOK:
					non200.Add(1)
					fail = fmt.Sprintf("status %d", code)
				case int(size) != in.size || sum.Sum32() != in.sum:
					wrong.Add(1)
					fail = fmt.Sprintf("answer of %d bytes, not the %d verified", size, in.size)
				}
				if fail != "" {
					mu.Lock()
					if res.firstError == "" {
						res.firstError = fmt.Sprintf("%s: %s", bytes.TrimSpace(in.body), fail)
					}
					mu.Unlock()
				}
			}
			mu.Lock()
			for k, v := range lat {
				res.byKind[k] = append(res.byKind[k], v...)
				res.all = append(res.all, v...)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.Requests, res.Non200, res.Transport, res.WrongBody = n.Load(), non200.Load(), transport.Load(), wrong.Load()
	res.Dials, res.Bytes = dials.Load(), bytesRead.Load()
	return res
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
