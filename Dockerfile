# Builds every command under cmd/ (the manager, the sidecar and the kubectl-ratelimit plugin)
# into one distroless, non-root image. Pick the binary with the container's command.
#
# GO_IMAGE and BASE_IMAGE default to the public images; a machine without a registry builds
# with local stand-ins under the same names (hack/cluster/images.sh base, which
# `make docker-build CONTAINER_TOOL=podman` runs). The cache mounts keep Go's module and build
# caches between builds (BuildKit and podman/buildah).
ARG GO_IMAGE=golang:1.26.8-bookworm
ARG BASE_IMAGE=gcr.io/distroless/static-debian12:nonroot

FROM ${GO_IMAGE} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
# The CRDs: kubectl-ratelimit lint embeds them (config/crd/crd.go).
COPY config/crd/ config/crd/
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# The release, recorded by the manager on the pods it injects (ratelimit.dev/sidecar-version).
ARG VERSION=""
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" -o /out/ ./cmd/...

FROM ${BASE_IMAGE}
COPY --from=build /out/ /usr/local/bin/
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/manager"]
