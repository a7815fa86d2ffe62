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
GOLANGCI_LINT := $(TESTBIN)/golangci-lint

.PHONY: all help build run test unit unit-norace e2e lint lint-ci lint-selftest lint-tool bench load fuzz fuzz-short testbin clean clean-all

## all: test (lint included) and build (the default)
all: test build

## help: every target with what it does (the "## target:" comments of this Makefile)
help:
	@awk 'NR == FNR { if (match($$0, /^[a-z][a-z0-9-]*:/)) target[substr($$0, 1, RLENGTH - 1)] = 1; next } \
	/^## / { line = substr($$0, 4); n = index(line, ":"); name = substr(line, 1, n - 1) } \
	/^## / && n > 1 && (name in target) { printf "\n  %-15s%s\n", name, substr(line, n + 2); next } \
	/^## / { printf "  %-15s%s\n", "", line }' $(firstword $(MAKEFILE_LIST)) $(firstword $(MAKEFILE_LIST))

## build: the static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/argocd-cluster-discovery

## run: serve the demo (static sources from testdata/demo) on 127.0.0.1:8080
run:
	$(GO) run ./cmd/argocd-cluster-discovery serve --config testdata/demo/config.yaml

## test: lint, every test with the race detector against a real kube-apiserver + etcd (built offline into
## bin/testbin on first use), unit-norace and each fuzz target briefly: what unit runs, with lint before the
## packages' tests and unit-norace and fuzz-short after them, beside the e2e runs (.ci/unit)
test: testbin
	$(UNIT_ENV) bash .ci/unit lint unit-norace fuzz-short

# go test's limit per package: the e2e suite runs about ten minutes with the race detector on two cores, go test's
# default limit
TEST_TIMEOUT ?= 25m

# the Argo CD versions .ci/testbin builds for the e2e suite: its default (ARGOCD_DEFAULT) first, then the others
ARGOCD_VERSIONS := $(shell bash .ci/testbin argocd-versions)
# the Argo CD version the whole e2e suite runs against (make e2e ARGOCD=2.14.21)
ARGOCD ?= $(firstword $(ARGOCD_VERSIONS))
# the e2e scenarios make unit runs against each other Argo CD version: the plugin contract (plugin and cluster
# generators, self-registration, the error a 503 shows), the Rancher lifecycle (removal, lifecycle) and the connect
# proofs (Argo CD's Secret -> cluster -> REST config code, argocd-k8s-auth, destination names); -skip leaves out the
# steps of TestEndToEnd that prove our service alone from CA_fetch_failure on (the steps before it run, in the same order
# as in the whole suite)
E2E_MATRIX_RUN  := ^(TestEndToEnd|TestArgoCDConnectCheck|TestArgoCDK8sAuthBinary|TestRancherCredentialsConnect|TestAROAgentClusters|TestCloudLifecycle)$$
E2E_MATRIX_SKIP := ^TestEndToEnd$$/^(CA_fetch_failure|duplicate|foreign_Secret_with_our_server|rename|Secret_names|mass_drop|outage|recovery|held_drop|two_replicas|lifecycle_again|removal_under_upsert-only)
E2E_MATRIX      := $(filter-out $(patsubst v%,%,$(ARGOCD)),$(ARGOCD_VERSIONS))

# what .ci/unit reads (make test and make unit)
UNIT_ENV = GO=$(GO) PKGS='$(PKGS)' TEST_TIMEOUT=$(TEST_TIMEOUT) KUBEBUILDER_ASSETS=$(TESTBIN) ARGOCD=$(ARGOCD) \
	E2E_MATRIX='$(E2E_MATRIX)' E2E_MATRIX_RUN='$(E2E_MATRIX_RUN)' E2E_MATRIX_SKIP='$(E2E_MATRIX_SKIP)'

## unit: every test with the race detector, against kube-apiserver + etcd from bin/testbin (make testbin first):
## the packages, the e2e suite against the default Argo CD version (ARGOCD), and the e2e suite's plugin contract,
## lifecycle and connect scenarios (E2E_MATRIX_RUN, E2E_MATRIX_SKIP) against each other version .ci/testbin
## builds, side by side (.ci/unit says why and how); make unit PKGS=./generator/... runs only those packages
unit:
	$(UNIT_ENV) bash .ci/unit

## unit-norace: the tests that skip under the race detector (it drops sync.Pool
## items at random, so allocation counts mean nothing there), run without it
NORACE_TESTS := ^TestCachedAnswerAllocations$$
unit-norace:
	@out=$$($(GO) test -count=1 -run '$(NORACE_TESTS)' -v ./generator/ 2>&1); rc=$$?; \
	echo "$$out" | grep -E '^(--- |ok|FAIL)'; \
	if echo "$$out" | grep -q -- '--- SKIP'; then echo "unit-norace: a test skipped without the race detector"; exit 1; fi; exit $$rc

## e2e: only the end-to-end suite (real ApplicationSet controller, kube-apiserver, our binary), against
## the default Argo CD version; make e2e ARGOCD=2.14.21 against another (bash .ci/testbin argocd-versions lists them),
## make e2e ARGOCD=2.14.21 E2E_SUBSET=1 only its plugin contract, lifecycle and connect scenarios
e2e: testbin
	ARGOCD=$(ARGOCD) KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) -v \
		$(if $(E2E_SUBSET),-run '$(E2E_MATRIX_RUN)' -skip '$(E2E_MATRIX_SKIP)') ./cmd/e2e/...

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

## testbin: build the test components (etcd, kube-apiserver, helm, promtool, and for each Argo CD version of the
## e2e matrix its ApplicationSet controller, argocd-k8s-auth and argocd-cluster-check) from the Go module proxy into
## bin/testbin (skips what is there and up to date)
testbin:
	TESTBIN=$(TESTBIN) bash .ci/testbin
	TESTBIN=$(TESTBIN) bash .ci/promtool

## lint: golangci-lint with .golangci.yml (govet, staticcheck, errcheck, errorlint, gocritic, testifylint, sloglint,
## revive, funlen, depguard, ...):
## first no tracked build output (.ci/no-build-outputs: no binary, no file over 1 MB), then the formatting
## of every Go file (gofmt, goimports), then the files generated from the provider registry (cmd/chartgen -check:
## the chart's schema for sources, the depguard rules), then the linters, then lint-ci and lint-selftest.
## golangci-lint is pinned and built from the Go module proxy into bin/testbin on first use
# chartgen imports every provider; built with the race detector, it reuses the tests' build of all of them (make
# test builds them with it) instead of a second build without it (over two minutes on a fresh machine)
lint: lint-tool
	bash .ci/no-build-outputs
	$(GOLANGCI_LINT) fmt --diff cmd generator sources deploy internal .ci
	$(GO) run -race ./cmd/chartgen -check
	$(GOLANGCI_LINT) run $(PKGS)
	@$(MAKE) --no-print-directory lint-ci lint-selftest

## lint-ci: the Go programs under .ci/ (which ./... skips): they are built against Argo CD in a scratch module of
## their own (.ci/testbin argocd, bin/.build/argocd), and linted there with the same .golangci.yml
lint-ci: lint-tool
	@TESTBIN=$(TESTBIN) bash .ci/testbin argocd
	cd bin/.build/argocd && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./cmd/check/ ./cmd/k8sauth/

## lint-selftest: prove the depguard rules still bite (sources/ importing generator/, a provider
## importing another, the service linking client-go's whole clientset): .ci/lint-selftest writes each forbidden import, expects the rule, removes it
lint-selftest: lint-tool
	GOLANGCI_LINT=$(GOLANGCI_LINT) bash .ci/lint-selftest

## lint-tool: build the pinned golangci-lint into bin/testbin (skipped when its version is there)
lint-tool:
	@TESTBIN=$(TESTBIN) bash .ci/testbin golangci-lint

## bench: every performance figure next to its target, as a Markdown table (cmd/benchreport),
## all measured in this run of this checkout: getparams vs pre-encoded bytes; the built binary's cold
## sync of 2,000 and 10,000 Secrets on a real kube-apiserver and the requests the apiserver counts over
## 5 passes with nothing to change; upstream calls per refresh; the built binary's RSS at 10,000
## clusters with a distinct CA each (Secrets and refresh trigger on), at rest, at start-up and under
## load; its log lines outside the configured format; time-to-Application from the e2e suite's first
## steps; then how long make test takes. The report is written to cmd/benchreport/last-run.md (the docs cite
## it for every figure and duration), raw outputs to bin/bench; exits 1 when a figure misses its target or was not measured.
bench: testbin build
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) run ./cmd/benchreport -binary $(BINARY) -benchtime $(BENCHTIME) -report cmd/benchreport/last-run.md

## load: cmd/loadgen against the built binary: 1,000 then 10,000 synthetic clusters, 200
## keep-alive connections for 60 s each (~3 minutes in all); fails on any error or goroutine
## growth. LOAD_FLAGS="-clusters 10000 -duration 10s" for a shorter run.
LOAD_FLAGS ?=
load: build
	$(GO) run ./cmd/loadgen -binary $(BINARY) $(LOAD_FLAGS)

## clean: remove the binary; keeps bin/testbin (slow to rebuild), see clean-all
clean:
	rm -f $(BINARY)

## clean-all: remove bin/, bin/testbin included
clean-all:
	rm -rf $(BIN)
