# argocd-cluster-discovery
GO        ?= go
BIN       := bin
BINARY    := $(BIN)/argocd-cluster-discovery
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
PKGS      := ./...
BENCHTIME ?= 1s

TESTBIN   := $(CURDIR)/bin/testbin

.PHONY: all build run test unit e2e lint bench testbin clean clean-all

all: lint test build

## build: the static binary in bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BINARY) ./cmd/argocd-cluster-discovery

## run: serve the demo (static sources from testdata/demo) on 127.0.0.1:8080
run:
	$(GO) run ./cmd/argocd-cluster-discovery serve --config testdata/demo/config.yaml

## test: lint, then every test with the race detector, against a real
## kube-apiserver + etcd (built offline into bin/testbin on first use)
test: lint testbin unit

unit:
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -race -count=1 $(PKGS)

## e2e: only the end-to-end suite (real ApplicationSet controller, kube-apiserver, our binary)
e2e: testbin
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -race -count=1 -v ./cmd/e2e/...

## testbin: build kube-apiserver and etcd from the Go module proxy into bin/testbin (skips what is there)
testbin:
	TESTBIN=$(TESTBIN) bash .ci/testbin

## lint: gofmt check and go vet
lint:
	@out=$$(gofmt -l cmd generator sources); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: performance figures (getparams vs pre-encoded bytes at 100/1k/10k clusters)
bench: testbin
	KUBEBUILDER_ASSETS=$(TESTBIN) $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./generator/... ./sources/...

## clean: remove the binary; keeps bin/testbin (slow to rebuild), see clean-all
clean:
	rm -f $(BINARY)

clean-all:
	rm -rf $(BIN)
