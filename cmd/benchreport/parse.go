package main

import (
	"bufio"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// benchLine is one result line of `go test -bench`, with the package the
// preceding "pkg:" line named.
type benchLine struct {
	Pkg     string
	Name    string // without the -GOMAXPROCS suffix
	N       int
	Metrics map[string]float64 // by unit: ns/op, x-preencoded, cold-s, ...
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// parseBench reads `go test -bench` output (several packages may follow
// each other) and returns its result lines in order.
func parseBench(r io.Reader) ([]benchLine, error) {
	var out []benchLine
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if p, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(p)
			continue
		}
		f := strings.Fields(line)
		// Name N value unit [value unit]...
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		n, err := strconv.Atoi(f[1])
		if err != nil {
			continue
		}
		b := benchLine{Pkg: pkg, Name: procsSuffix.ReplaceAllString(f[0], ""), N: n, Metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				break
			}
			b.Metrics[f[i+1]] = v
		}
		out = append(out, b)
	}
	return out, sc.Err()
}

// find returns the last line of the package (by import path suffix) and
// name, if any.
func find(lines []benchLine, pkgSuffix, name string) (benchLine, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i].Name == name && strings.HasSuffix(lines[i].Pkg, pkgSuffix) {
			return lines[i], true
		}
	}
	return benchLine{}, false
}

// e2eFigure is what the end-to-end suite printed about time-to-Application.
type e2eFigure struct {
	ToApplication time.Duration
	// Refresh is the refresh interval the suite ran with; 0 when the log
	// does not say.
	Refresh time.Duration
}

var (
	e2eDetailed = regexp.MustCompile(`time-to-Application: ([0-9.]+)s \(refresh interval ([0-9a-zµ.]+)`)
	e2ePlain    = regexp.MustCompile(`(?m)^time-to-Application: ([0-9.]+)s\s*$`)
)

// parseE2E returns the last time-to-Application of the e2e steps' output
// (go test -v), with the refresh interval when the verbose line gives it.
func parseE2E(log string) (e2eFigure, bool) {
	secs := func(s string) time.Duration {
		v, _ := strconv.ParseFloat(s, 64)
		return time.Duration(v * float64(time.Second))
	}
	if m := e2eDetailed.FindAllStringSubmatch(log, -1); len(m) > 0 {
		last := m[len(m)-1]
		refresh, _ := time.ParseDuration(last[2])
		return e2eFigure{ToApplication: secs(last[1]), Refresh: refresh}, true
	}
	if m := e2ePlain.FindAllStringSubmatch(log, -1); len(m) > 0 {
		return e2eFigure{ToApplication: secs(m[len(m)-1][1])}, true
	}
	return e2eFigure{}, false
}
