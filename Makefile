# argocd-cluster-discovery
GO        ?= go
BIN       := bin
BINARY    := $(BIN)/argocd-cluster-discovery
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      := ./...
BENCHTIME ?= 1s
SHELL     := /bin/bash

TESTBIN   := $(CURDIR)/bin/testbin

.PHONY: all build run test unit unit-norace e2e lint bench load fuzz fuzz-short testbin clean clean-all

all: lint test build

## build: the static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/argocd-cluster-discovery

## run: serve the demo (static sources from testdata/demo) on 127.0.0.1:8080
run:
	$(GO) run ./cmd/argocd-cluster-discovery serve --config testdata/demo/config.yaml

## test: lint, then every test with the race detector, against a real
## kube-apiserver + etcd (built offline into bin/testbin on first use), then
## each fuzz target briefly
test: lint testbin unit unit-norace fuzz-short

unit:
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -race -count=1 $(PKGS)

## unit-norace: the tests that skip under the race detector (it drops sync.Pool
## items at random, so allocation counts mean nothing there), run without it
NORACE_TESTS := ^TestCachedAnswerAllocations$$
unit-norace:
	@out=$$($(GO) test -count=1 -run '$(NORACE_TESTS)' -v ./generator/ 2>&1); rc=$$?; \
	echo "$$out" | grep -E '^(--- |ok|FAIL)'; \
	if echo "$$out" | grep -q -- '--- SKIP'; then echo "unit-norace: a test skipped without the race detector"; exit 1; fi; exit $$rc

## e2e: only the end-to-end suite (real ApplicationSet controller, kube-apiserver, our binary)
e2e: testbin
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -race -count=1 -v ./cmd/e2e/...

## fuzz: run each fuzz target for FUZZTIME (make fuzz FUZZTIME=5m); a failing input
## is written to <package>/testdata/fuzz/<Target>/ and replayed by every go test.
## Seeds: testdata/fuzz/<Target>/ (see testdata/fuzz/README.md)
FUZZTIME       ?= 1m
# a count, not a duration: with a duration, Go 1.26's fuzz coordinator can fail a target with a bare
# "context deadline exceeded" when the time runs out while a worker is mid-input (golang/go#75804, fixed in Go 1.27)
FUZZTIME_SHORT ?= 200x
# "<package dir>:<FuzzTarget>" for every fuzz target of the module
FUZZ_TARGETS = $(shell grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' cmd generator sources \
	| sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*).*|\1:\2|' | sort)

fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=./$${t%%:*}; name=$${t##*:}; \
		echo "fuzz $$name in $$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	done

## fuzz-short: each fuzz target for FUZZTIME_SHORT executions (part of make test)
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT)

## testbin: build kube-apiserver and etcd from the Go module proxy into bin/testbin (skips what is there)
testbin:
	TESTBIN=$(TESTBIN) bash .ci/testbin

## lint: gofmt check and go vet
lint:
	@out=$$(gofmt -l cmd generator sources deploy); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: every performance figure next to its target, as a Markdown table (cmd/benchreport),
## all measured in this run of this checkout: getparams vs pre-encoded bytes; the built binary's cold
## sync of 2,000 and 10,000 Secrets on a real kube-apiserver and the requests the apiserver counts over
## 5 passes with nothing to change; upstream calls per refresh; the built binary's RSS at 10,000
## clusters with a distinct CA each (Secrets and refresh trigger on), at rest, at start-up and under
## load; its log lines outside the configured format; time-to-Application from the e2e suite's first
## steps. Raw outputs in bin/bench. ~7 minutes; exits 1 when a figure misses its target or was not measured.
bench: testbin build
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/benchreport -binary $(BINARY) -benchtime $(BENCHTIME)

## load: cmd/loadgen against the built binary: 1,000 then 10,000 synthetic clusters, 200
## keep-alive connections for 60 s each (~3 minutes in all); fails on any error or goroutine
## growth. LOAD_FLAGS="-clusters 10000 -duration 10s" for a shorter run.
LOAD_FLAGS ?=
load: build
	$(GO) run ./cmd/loadgen -binary $(BINARY) $(LOAD_FLAGS)

## clean: remove the binary; keeps bin/testbin (slow to rebuild), see clean-all
clean:
	rm -f $(BINARY)

clean-all:
	rm -rf $(BIN)
