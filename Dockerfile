# syntax=docker/dockerfile:1
# Multi-stage build: a static binary (CGO off) on a distroless base with no
# shell, running as a non-root user.
#
# The Helm chart (deploy/helm/argocd-cluster-discovery) runs this image by
# default as ghcr.io/argocd-cluster-discovery/argocd-cluster-discovery:<appVersion>
# (the repository named by the source label below), as user 65532 with a
# read-only root file system, port 8080, and its configuration mounted where
# CMD reads it; deploy/chart_test.go checks that the two stay in step. Build it
# for the chart with:
#   docker build --build-arg VERSION=0.2.0 \
#     -t ghcr.io/argocd-cluster-discovery/argocd-cluster-discovery:0.2.0 .
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY cmd/ cmd/
COPY generator/ generator/
COPY sources/ sources/
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/argocd-cluster-discovery ./cmd/argocd-cluster-discovery

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="argocd-cluster-discovery" \
      org.opencontainers.image.source="https://github.com/argocd-cluster-discovery/argocd-cluster-discovery" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/argocd-cluster-discovery /usr/local/bin/argocd-cluster-discovery
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/argocd-cluster-discovery"]
CMD ["serve", "--config", "/etc/argocd-cluster-discovery/config.yaml"]
