# ratelimit-operator: every install, build and test step lives here, so a fresh machine needs
# only Go and apt. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Images and binaries.
IMG ?= ratelimit-operator:dev
# The release the manager reports (and records on the pods it injects): IMG's tag by default.
VERSION ?= $(lastword $(subst :, ,$(IMG)))
BIN ?= bin
CONTAINER_TOOL ?= docker

# Tools pinned in go.mod (controller-gen) and hack/tools/go.mod (golangci-lint, crd-ref-docs).
CONTROLLER_GEN := go tool controller-gen
GOLANGCI_LINT := go tool -modfile=hack/tools/go.mod golangci-lint
CRD_REF_DOCS := go tool -modfile=hack/tools/go.mod crd-ref-docs
HELM := go tool -modfile=hack/tools/go.mod helm

# The Helm chart. `make manifests` copies the generated CRD, ClusterRole and webhook manifests
# into it, so config/ stays their single source and verify-generated catches a stale copy.
CHART := charts/ratelimit-operator

# Where `make docs` writes the API reference (hack/apidocs/docs_test.go points it at a temp file).
API_DOCS ?= docs/api.md

# Test knobs: extra `go test` flags and the package pattern.
GO_TEST_FLAGS ?= -race -count=1 -timeout 30m
PKG ?= ./...

.PHONY: all
all: build

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: ## Generate the CRD, RBAC and webhook manifests from the API markers, and the alerts' PrometheusRule.
	$(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths="./..." output:crd:artifacts:config=config/crd/bases
	go run ./hack/rules
	rm -f $(CHART)/crds/*.yaml && cp config/crd/bases/*.yaml $(CHART)/crds/
	cp config/rbac/role.yaml $(CHART)/files/generated/manager-role.yaml
	cp config/webhook/manifests.yaml $(CHART)/files/generated/webhooks.yaml

.PHONY: generate
generate: ## Generate DeepCopy methods for the API types, and the composed Lua scripts (internal/scripts/generated).
	$(CONTROLLER_GEN) object paths="./api/..."
	go generate ./internal/scripts

.PHONY: docs
docs: ## Generate docs/api.md from the API types (crd-ref-docs; config and templates in hack/apidocs).
	$(CRD_REF_DOCS) --log-level=WARN --renderer=markdown --source-path=api/v1alpha1 \
	  --config=hack/apidocs/config.yaml --templates-dir=hack/apidocs/templates --output-path=$(API_DOCS)

.PHONY: fmt
fmt: ## Run gofmt on the code.
	gofmt -s -w $$(git ls-files '*.go' | grep -v zz_generated)

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: ## Run golangci-lint (pinned in hack/tools/go.mod).
	$(GOLANGCI_LINT) run ./...

.PHONY: verify-generated
verify-generated: manifests generate docs ## Fail when generated files differ from what is committed.
	@git diff --exit-code -- api config docs $(CHART)/crds $(CHART)/files/generated internal/scripts/generated || { echo "generated files are stale: run 'make manifests generate docs' and commit" >&2; exit 1; }
	@test -z "$$(git status --porcelain -- internal/scripts/generated)" || { echo "internal/scripts/generated has files git does not track: run 'make generate' and commit" >&2; exit 1; }

.PHONY: demo
demo: envtest redis proxies ## The whole system on this machine: control plane, Redis, manager, sidecar, samples (DEMO_ARGS=--stay keeps it up).
	KUBECTL="$$(hack/kubectl.sh)" KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go run ./hack/demo $(DEMO_ARGS)

.PHONY: test
test: manifests generate vet envtest redis promtool proxies cluster cluster-images ## Run every test against a real kube-apiserver + etcd, real redis-server, real Caddy and nginx, and a real single-node cluster.
	KUBECTL="$$(hack/kubectl.sh)" KUBECTL_PINNED="$$(hack/kubectl.sh --pinned)" KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go test $(GO_TEST_FLAGS) $(PKG)

.PHONY: e2e
e2e: ## Run the cluster suite (test/e2e/cluster) against KUBECONFIG's cluster with the image E2E_IMAGE (see docs/install.md).
	@[ -n "$$KUBECONFIG" ] && [ -n "$$E2E_IMAGE" ] || { echo "set KUBECONFIG and E2E_IMAGE (the operator image your cluster can pull); see docs/install.md" >&2; exit 1; }
	KUBECTL_PINNED="$${KUBECTL:-$$(hack/kubectl.sh)}" go test -count=1 -timeout 45m -v ./test/e2e/cluster/

.PHONY: bench
bench: redis envtest proxies ## Print the benchmark table: scripts, limiter, sidecar gRPC (RLS, ext_authz), forward auth through Caddy and nginx, controller, Redis Cluster (docs/benchmarks.md; BENCH_ARGS=flags, BENCH_GO=1 adds Go micro-benchmarks).
	KUBEBUILDER_ASSETS="$$(hack/envtest.sh)" go run ./test/bench/limiter $(BENCH_ARGS)
	@if [ -n "$(BENCH_GO)" ]; then go test -run '^$$' -bench . -benchtime 2s ./internal/limiter/ ./internal/keylayout/ ./internal/condition/ ./internal/sidecar/engine/; fi

FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: ## Run every go-fuzz target for FUZZTIME each (default 30s); failures land in testdata/fuzz.
	@for pkg in $$(go list ./...); do \
	  for f in $$(go test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "fuzz $$pkg $$f"; go test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

##@ Build

.PHONY: helm
helm: ## Lint the Helm chart in charts/ratelimit-operator (helm pinned in hack/tools/go.mod).
	$(HELM) lint --strict $(CHART)

.PHONY: build
build: manifests generate ## Build the manager and sidecar binaries into bin/.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/sidecar ./cmd/sidecar

.PHONY: run
run: manifests generate ## Run the manager against the current kubeconfig (webhooks off).
	go run ./cmd/manager --health-probe-bind-address=:8081 --metrics-bind-address=0 --webhooks=false

# podman (and buildah) build here without a registry: the base images are assembled locally
# when absent (hack/cluster/images.sh base), and RUN steps use the host's network rather than
# a bridge of podman's own. Without systemd, podman needs cgroupfs and a file event log.
ifneq ($(filter podman buildah,$(notdir $(CONTAINER_TOOL))),)
CONTAINER_BUILD_FLAGS ?= --network=host
endif
ifeq ($(notdir $(CONTAINER_TOOL)),podman)
CONTAINER_TOOL_FLAGS ?= --cgroup-manager=cgroupfs --events-backend=file
endif

.PHONY: docker-build
docker-build: ## Build the container image (IMG) with CONTAINER_TOOL: docker, or podman (works here: base images assembled locally).
ifneq ($(filter podman buildah,$(notdir $(CONTAINER_TOOL))),)
	hack/cluster/images.sh base
endif
	$(CONTAINER_TOOL) $(CONTAINER_TOOL_FLAGS) build $(CONTAINER_BUILD_FLAGS) --build-arg VERSION=$(VERSION) -t $(IMG) .

##@ Dependencies

.PHONY: cluster
cluster: envtest ## Build the single-node cluster's binaries (kubelet, kube-proxy, controller-manager, scheduler, CoreDNS; cached outside the clone) and install its Debian packages.
	@hack/cluster/cluster.sh build >/dev/null

# The cluster suite's images, built before `go test` so that a cold image build (up to 20 min
# on two loaded cores) does not count against the test timeout; the suite then finds them in
# podman's storage. Root only (rootful podman); without root the suite skips.
.PHONY: cluster-images
cluster-images: ## Build the cluster suite's images with podman (operator from the Dockerfile, Redis, Caddy, agnhost, pause).
	@if [ "$$(id -u)" = 0 ]; then hack/cluster/images.sh prebuild; fi

.PHONY: cluster-up
cluster-up: cluster ## Bring up the single-node cluster on this machine (root); prints the KUBECONFIG path.
	hack/cluster/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Tear the single-node cluster down, leaving the machine as it was.
	hack/cluster/cluster.sh down

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for envtest from the Go module proxy (cached outside the clone).
	@hack/envtest.sh >/dev/null

.PHONY: redis
redis: ## Install redis-server and redis-tools with apt-get when missing.
	@hack/redis.sh

.PHONY: promtool
promtool: ## Install promtool (Debian package prometheus) with apt-get when missing, for the alert tests.
	@hack/promtool.sh

.PHONY: proxies
proxies: ## Install Caddy and nginx (Debian caddy, nginx-light) with apt-get when missing: the forward-auth tests' real proxies.
	@hack/proxies.sh
