# syntax=docker/dockerfile:1
# Multi-stage build: a static binary (CGO off) on a distroless base with no
# shell, running as a non-root user.
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
COPY --from=build /out/argocd-cluster-discovery /usr/local/bin/argocd-cluster-discovery
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/argocd-cluster-discovery"]
CMD ["serve", "--config", "/etc/argocd-cluster-discovery/config.yaml"]
