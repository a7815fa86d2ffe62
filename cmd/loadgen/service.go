package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testenv"
	"github.com/argocd-cluster-discovery/argocd-cluster-discovery/internal/testutil/freeport"
)

// buildService builds the service binary into dir from the module that
// holds this program's source (the current directory's module), the way
// the Dockerfile and `make build` do: without symbol table and DWARF
// (-s -w), which a shipped binary has no use for and which measured ~9 MiB
// more resident memory.
func buildService(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "argocd-cluster-discovery")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/argocd-cluster-discovery")
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %w", err)
	}
	return bin, nil
}

// moduleRoot is the directory of the module that holds this program's
// source (the current directory's module).
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("go env GOMOD: not in a module: run loadgen from the repository")
	}
	return filepath.Dir(mod), nil
}

// freeLoopbackAddr returns a loopback address with a port free right now.
func freeLoopbackAddr() (string, error) {
	port, err := freeport.Loopback()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), nil
}

// service is the running binary.
type service struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:port
	log  string // its stdout and stderr
	done chan error
	// exit is closed when the process has exited.
	exit chan struct{}
}

// exited is closed once the process has exited.
func (s *service) exited() <-chan struct{} { return s.exit }

// startService starts bin serving config on addr, its output appended to
// logPath (a restarted service's log follows the first process's).
func startService(bin, config, addr, logPath string) (*service, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := evictFromPageCache(bin); err != nil {
		logf.Close()
		return nil, fmt.Errorf("evict %s from the page cache: %w", bin, err)
	}
	cmd := exec.Command(bin, "serve", "--config", config)
	cmd.Stdout, cmd.Stderr = logf, logf
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &service{cmd: cmd, base: "http://" + addr, log: logPath, done: make(chan error, 1), exit: make(chan struct{})}
	go func() { s.done <- cmd.Wait(); logf.Close(); close(s.exit) }()
	return s, nil
}

// opsClient makes one request per connection, so that scraping leaves no
// connection (and no server goroutine) behind.
var opsClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitReady polls /readyz until 200 and /status until every source has
// listed (ready means the process can answer, and a 503 is an answer), the
// process exits, or timeout.
func (s *service) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err
			return fmt.Errorf("service exited before ready (%w); log:\n%s", err, s.logTail())
		default:
		}
		if resp, err := opsClient.Get(s.base + "/readyz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && testenv.SourcesSynced(opsClient, s.base, token) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not ready after %s; log:\n%s", timeout, s.logTail())
}

// processStats are the figures read from the service.
type processStats struct {
	Goroutines int     `json:"goroutines"`
	RSSBytes   float64 `json:"rssBytes"`
	// RSSFileBytes is the file-backed part of RSS: the binary's pages.
	RSSFileBytes float64 `json:"rssFileBytes"`
	HeapInUse    float64 `json:"heapInUseBytes"`
}

// metrics reads the service's /metrics.
func (s *service) metrics() (map[string]*dto.MetricFamily, error) {
	resp, err := opsClient.Get(s.base + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape /metrics: status %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// scrape reads go_goroutines, process_resident_memory_bytes and
// go_memstats_heap_inuse_bytes from /metrics.
func (s *service) scrape() (processStats, error) {
	families, err := s.metrics()
	if err != nil {
		return processStats{}, err
	}
	vals := map[string]float64{}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes", "go_memstats_heap_inuse_bytes"} {
		ms := families[name].GetMetric()
		if len(ms) == 0 {
			return processStats{}, fmt.Errorf("/metrics has no %s", name)
		}
		vals[name] = ms[0].GetGauge().GetValue()
	}
	return processStats{Goroutines: int(vals["go_goroutines"]), RSSBytes: vals["process_resident_memory_bytes"],
		HeapInUse: vals["go_memstats_heap_inuse_bytes"], RSSFileBytes: s.procStatus("RssFile:")}, nil
}

// procStatus reads a "kB" field of /proc/PID/status in bytes, or 0 where
// /proc is not available.
func (s *service) procStatus(field string) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			return kb * 1024
		}
	}
	return 0
}

// peakRSS is the process's high-water mark of resident memory (VmHWM), or 0
// where /proc is not available.
func (s *service) peakRSS() float64 { return s.procStatus("VmHWM:") }

// resetPeakRSS sets the high-water mark of resident memory back to the
// current RSS (Linux: "5" to /proc/PID/clear_refs), so that peakRSS then
// reports the peak of what follows, not of start-up.
func (s *service) resetPeakRSS() error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.cmd.Process.Pid), []byte("5"), 0)
}

// stop sends SIGTERM and waits for the graceful shutdown, then kills.
func (s *service) stop(grace time.Duration) error {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			return err
		}
		if err != nil {
			return fmt.Errorf("service exited with %w after SIGTERM; log:\n%s", err, s.logTail())
		}
		return nil
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.exit
		return fmt.Errorf("service did not stop within %s of SIGTERM; killed", grace)
	}
}

func (s *service) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(bytes.TrimSpace(b))
}

// logFormat counts the lines of the service's log and those that are not
// one JSON object each, as the configured log.format json writes them
// (a client-go line in klog's own format would be one), with the first of
// those.
func (s *service) logFormat() (lines, foreign int, first string, err error) {
	f, err := os.Open(s.log)
	if err != nil {
		return 0, 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		lines++
		var obj map[string]any
		if json.Unmarshal(line, &obj) != nil {
			if foreign++; first == "" {
				first = string(line[:min(len(line), 200)])
			}
		}
	}
	return lines, foreign, first, sc.Err()
}
