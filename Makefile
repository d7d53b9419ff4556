# Portico — API-gateway module for Kubernetes.
# `make help` lists the targets. Everything the targets need is built from
# Go modules into ./bin (project tools) or the user cache (control plane).

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
REGISTRY ?= ghcr.io/portico-dev
CONTROLLERS := apirule ratelimit gateway ratelimitservice
# COMPONENT_NAMES sets, in a recipe's loop over CONTROLLERS ($$c), the
# component's binary, image and RBAC name ($$b: contract.Controller.Binary,
# <name>-controller but for the rate-limit service) and the packages whose
# RBAC markers it gets ($$p: a controller's, with the runner's it links; the
# rate-limit service's own only).
COMPONENT_NAMES = case $$c in \
	ratelimitservice) b=portico-ratelimit-service; p="./controllers/$$c/...";; \
	*) b=$$c-controller; p="./controllers/$$c/...;./controllers/internal/...";; esac
PLATFORMS ?= linux/amd64,linux/arm64
CONTAINER_TOOL ?= docker

LOCALBIN := $(CURDIR)/bin
CONTROLLER_GEN_VERSION := v0.23.0
GOLANGCI_LINT_VERSION := v2.15.0
ACTIONLINT_VERSION := v1.7.12
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
GOLANGCI_LINT := $(LOCALBIN)/golangci-lint-$(GOLANGCI_LINT_VERSION)
ACTIONLINT := $(LOCALBIN)/actionlint-$(ACTIONLINT_VERSION)
# promtool, Prometheus's rule checker and rule test engine, and the
# Prometheus server the node e2e runs are tools of the test/monitoring module
# (its go.mod's tool directive): built at the Prometheus version that module
# pins, in one go build that shares that module's compiled PromQL packages
# with its tests. PROMETHEUS_TAGS drop every service discovery but
# Kubernetes' (the e2e's) from both; without the builtinassets tag the
# server has no web UI, only its HTTP API, which is all the e2e asks.
# Cold (empty build cache): 326 CPU-seconds for both, against 460 for the
# untagged promtool alone.
PROMETHEUS_VERSION := $(shell awk '$$1 == "github.com/prometheus/prometheus" {print $$2; exit}' test/monitoring/go.mod)
PROMTOOL := $(LOCALBIN)/promtool-$(PROMETHEUS_VERSION)
PROMETHEUS := $(LOCALBIN)/prometheus-$(PROMETHEUS_VERSION)
PROMETHEUS_TAGS := remove_all_sd,enable_kubernetes_sd

# Every go command make runs builds the same flavour of each package: static
# (no cgo) with trimmed paths, as the images and the release are built. vet,
# lint, build, go test and the e2e's releases then share one compile of the
# dependency graph instead of compiling it once per set of flags.
export CGO_ENABLED := 0
GOFLAGS += -trimpath
export GOFLAGS

# The Go modules of the tree that make lints and tests (hack/tools builds
# the control plane and is only built): the product (root), the release and
# OLM tooling, the e2e suite, and the proof of the chart's alerts and
# dashboard against Prometheus.
GO_MODULES := . hack/release e2e test/monitoring test/istio

# release_tool builds the release module's command $(1) (hack/release/cmd/$(1))
# into bin/release-tools; the recipe then runs it from the repository root.
release_tool = (cd hack/release && go build -o $(LOCALBIN)/release-tools/$(1) ./cmd/$(1))

GO_LDFLAGS := -s -w -X github.com/portico-dev/portico/internal/contract.version=$(VERSION)

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-24s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate DeepCopy methods (zz_generated.deepcopy.go).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs (config/crd/bases), RBAC (config/rbac) and the chart's copies of both.
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=portico-operator paths="./operator/..." output:rbac:artifacts:config=config/rbac/operator
	@for c in $(CONTROLLERS); do \
		[ -d controllers/$$c ] || continue; \
		$(COMPONENT_NAMES); \
		echo "controller-gen rbac $$b"; \
		$(CONTROLLER_GEN) rbac:roleName=$$b paths="$$p" \
			output:rbac:artifacts:config=config/rbac/$$b; done
	@$(MAKE) --no-print-directory chart bundle

.PHONY: chart
chart: ## Copy the CRDs and RBAC rules in config/ into charts/portico (templates/crds, files/rbac).
	go run ./hack/chartsync --config config --chart charts/portico

.PHONY: fmt
fmt: ## Run gofmt on the tree.
	gofmt -l -w $$(git ls-files --cached --others --exclude-standard '*.go')

.PHONY: vet
vet: ## Run go vet on every Go module of the tree (GO_MODULES).
	@for d in $(GO_MODULES); do echo "go vet ($$d)"; (cd $$d && go vet ./...) || exit 1; done

.PHONY: lint
lint: $(GOLANGCI_LINT) $(ACTIONLINT) ## Run golangci-lint on every Go module of the tree (incl. import grouping, import boundaries, function length; see .golangci.yml), and actionlint on .github/workflows.
	@for d in $(GO_MODULES); do echo "golangci-lint ($$d)"; \
		(cd $$d && $(GOLANGCI_LINT) run --config $(CURDIR)/.golangci.yml ./...) || exit 1; done
	$(ACTIONLINT) -no-color

.PHONY: verify-generated
verify-generated: generate manifests fmt ## Regenerate, then fail if that changed any tracked file (CI runs this).
	@$(MAKE) --no-print-directory check-clean

.PHONY: check-clean
check-clean: ## Fail if go.mod/go.sum of a module in MODULE_DIRS are not tidy, or if any file differs from the commit.
	@for d in $(MODULE_DIRS); do \
		if ! diff=$$(cd $$d && go mod tidy -diff); then \
			echo "$$d/go.mod or go.sum is not tidy; run 'go mod tidy' in $$d and commit:"; \
			echo "$$diff"; exit 1; fi; done
	@if [ -n "$$(git status --porcelain)" ]; then \
		echo "generated or formatted files differ from the commit; run 'make generate manifests fmt' and commit:"; \
		git status --porcelain; git --no-pager diff --stat; exit 1; fi

##@ Build

.PHONY: build
build: ## Build the operator, every controller binary and the kubectl-portico plugin into ./bin.
	go build -ldflags '$(GO_LDFLAGS)' -o $(LOCALBIN)/portico-operator ./operator
	go build -ldflags '$(GO_LDFLAGS)' -o $(LOCALBIN)/kubectl-portico ./kubectl-portico
	@for c in $(CONTROLLERS); do \
		if [ -f controllers/$$c/main.go ]; then \
			$(COMPONENT_NAMES); \
			echo "go build $$b"; \
			go build -ldflags '$(GO_LDFLAGS)' -o $(LOCALBIN)/$$b ./controllers/$$c; \
		fi; done

IMAGES_DIR ?= $(LOCALBIN)/images
IMAGES_ARCH ?= $(shell go env GOARCH)

.PHONY: images
images: ## Build the operator image and one image per controller without a container engine: bin/images/<image>.tar (docker archives; REGISTRY, VERSION, IMAGES_ARCH).
	$(call release_tool,images)
	$(LOCALBIN)/release-tools/images --registry $(REGISTRY) --tag $(VERSION) --arch $(IMAGES_ARCH) --output $(IMAGES_DIR)

# A release: VERSION (vX.Y.Z[-pre]) to REGISTRY (host[:port]/path);
# SIGN_KEY signs every digest with a cosign key file (its password in
# COSIGN_PASSWORD); CI signs keyless instead.
SIGN_KEY ?=
RELEASE_DIR ?= dist/$(VERSION)

.PHONY: release
release: ## Publish a release: multi-arch images with SBOMs, the OCI chart pinned by digest, the OLM bundle image; release.json, install.yaml, NOTES.md in dist/VERSION (VERSION, REGISTRY, PLATFORMS, SIGN_KEY).
	$(call release_tool,release)
	$(LOCALBIN)/release-tools/release --version $(VERSION) --registry $(REGISTRY) --platforms $(PLATFORMS) \
		--output $(RELEASE_DIR) $(if $(SIGN_KEY),--sign-key $(SIGN_KEY))

# The OLM catalog lists the bundles of RELEASES (their release.json, e.g.
# "dist/v0.1.0/release.json dist/v0.2.0/release.json"), served by OPM_IMAGE.
RELEASES ?=
OPM_IMAGE ?= quay.io/operator-framework/opm:v1.61.0

.PHONY: catalog
catalog: ## Publish the OLM catalog image REGISTRY/portico-catalog:VERSION: a file-based catalog of the bundles of RELEASES in the stable channel (RELEASES, OPM_IMAGE).
	$(call release_tool,release)
	$(LOCALBIN)/release-tools/release catalog --registry $(REGISTRY) --tag $(VERSION) --opm-image $(OPM_IMAGE) $(RELEASES)

# BUNDLE_VERSION is the operator version `make bundle` packages, as the images
# are tagged: VERSION when given (make bundle VERSION=v1.2.3), else empty for
# the chart's appVersion, which the checked-in bundle/ is generated for so
# that it is reproducible. The bundle's semver drops a leading v; a version
# that is not semver (git describe of an untagged commit) becomes 0.0.0-dev.
BUNDLE_VERSION ?= $(if $(filter command line environment%,$(origin VERSION)),$(VERSION))

.PHONY: bundle
bundle: ## Generate the OLM bundle (bundle/, bundle.Dockerfile) from the rendered chart (VERSION=v1.2.3 for a release), and its OLM v1 installer (config/olmv1/installer.yaml).
	$(call release_tool,bundle)
	$(LOCALBIN)/release-tools/bundle $(if $(BUNDLE_VERSION),--version $(BUNDLE_VERSION)) --registry $(REGISTRY) \
		--output bundle --dockerfile bundle.Dockerfile --olmv1-installer config/olmv1/installer.yaml

##@ Test

# Every module directory whose dependencies make test downloads.
MODULE_DIRS := $(GO_MODULES) hack/tools hack/tools/olm hack/tools/olmv1 hack/tools/registry

.PHONY: prefetch
prefetch: ## Download the modules of every module in MODULE_DIRS in the background, so downloads overlap the first compiles (make test starts with it).
	@echo "go mod download ($(MODULE_DIRS)) in the background"
	@for d in $(MODULE_DIRS); do (cd $$d && go mod download) </dev/null >/dev/null 2>&1 & done; true

.PHONY: testbin
testbin: ## Build the local control plane from Go modules (cached) and print its directory.
	@hack/testbin.sh

.PHONY: envtest-assets
envtest-assets: ## Print the envtest assets path (KUBEBUILDER_ASSETS), building it if needed.
	@hack/testbin.sh

.PHONY: helm-lint
helm-lint: ## Lint charts/portico with the helm CLI (go test ./charts/... lints it with the Helm SDK too).
	"$$(hack/testbin.sh)/helm" lint --strict --namespace portico-system charts/portico

.PHONY: test
test: prefetch generate manifests traefik-background oauth2-proxy-background istiod-background olmv1-background fmt lint build $(PROMTOOL) ## Run unit, envtest and the e2e suite on a real node (builds what it needs; the node needs root).
	@# traefik-background: Traefik, the node e2e's Gateway API implementation,
	@# builds from here on, on whatever CPU the rest leaves idle (downloads,
	@# envtest and benchmark waits); the node e2e raises it to normal
	@# priority and waits for it (a lock). oauth2-proxy-background likewise
	@# builds the login story's authorizer, and istiod-background istiod
	@# (from test/istio's pin: its Istio packages are the offline check's).
	@# olmv1-background likewise OLM v1 (operator-controller, catalogd).
	@# lint runs go vet's analyzers (govet), so make vet is not repeated here.
	@# In CI the tree must be exactly what was committed after regeneration.
	@if [ -n "$$CI" ]; then $(MAKE) --no-print-directory check-clean; fi
	@# --node: the envtest binaries and the node's in one go build. Test
	@# binaries are linked without DWARF (-w): faster links, same traces.
	@# Every module's tests: the product's, the release and OLM tooling's,
	@# the chart's alerts and dashboard with promtool, and Istio's own code
	@# over what the controllers write (test/istio; lint above compiled its
	@# Istio packages) (the e2e module's need a cluster: test-e2e-node below).
	@# A package may take 20 minutes, not go test's default 10: test/istio's
	@# run takes 2-3 minutes on a quiet machine and 8 on a loaded one.
	assets="$$(hack/testbin.sh --node)"; for d in . hack/release test/monitoring test/istio; do echo "go test ($$d)"; \
		(cd $$d && KUBEBUILDER_ASSETS="$$assets" PROMTOOL=$(PROMTOOL) go test -ldflags=-w ./... -count=1 -timeout 20m) || exit 1; done
	@# Every benchmark in its short mode (it asserts results, never speed),
	@# with the fuzz targets beside it: their instrumented build is CPU, the
	@# short benchmarks mostly wait for their clusters.
	@mkdir -p $(LOCALBIN)
	$(MAKE) --no-print-directory test-fuzz >$(LOCALBIN)/fuzz.log 2>&1 & fuzz=$$!; \
		status=0; $(MAKE) --no-print-directory bench-short || status=$$?; \
		wait $$fuzz || { echo "test-fuzz failed:"; status=1; }; cat $(LOCALBIN)/fuzz.log; exit $$status
	$(MAKE) --no-print-directory test-e2e-node

# Every fuzz target, as package:Target:executions. Their seed corpora
# (testdata/fuzz/<Target>/) also run as plain tests in `go test ./...`.
# make test fuzzes for a number of executions (about 10 s of each on an
# idle machine), never for a duration: a -fuzztime duration races Go's
# fuzz coordinator (go.dev/issue/75804, fixed in Go 1.27, not in 1.26.x),
# which fails the target with a bare "context deadline exceeded" and no
# input when the deadline falls on a worker mid-call (it failed CI once).
FUZZ_TARGETS := ./controllers/apirule/internal/translate:FuzzTranslate:5000 ./controllers/ratelimit/internal/topology:FuzzCompute:20000 ./controllers/gateway/internal/certs:FuzzClientCABundle:20000 \
	./controllers/internal/quarantine:FuzzHandoff:5000 ./controllers/internal/quarantine:FuzzEventStream:20000
FUZZ_TIME ?=
# Each input that widens coverage is minimized before it is kept: by
# default for up to 60 s, which a target whose execution costs a
# millisecond (FuzzHandoff) spends on one input. Executions here too.
FUZZ_MINIMIZE ?= 100x

.PHONY: test-monitoring
test-monitoring: $(PROMTOOL) ## Prove the chart's alerts and dashboard (charts/portico/files/monitoring) with promtool check/test rules and the PromQL parser (test/monitoring; make test runs it).
	cd test/monitoring && PROMTOOL=$(PROMTOOL) go test ./... -count=1

.PHONY: test-istio
test-istio: ## Judge what the controllers write with Istio's own code, offline (test/istio): istiod's webhook, its Gateway API conversion and Envoy configuration against the tenancy judge, over every golden file and 600 fuzz-drawn APIRules (make test runs it).
	cd test/istio && go test -ldflags=-w ./... -count=1 -timeout 20m

.PHONY: test-fuzz
test-fuzz: ## Fuzz every fuzz target for its number of executions (FUZZ_TIME=10m for a longer hunt by time). A failure leaves its input in testdata/fuzz: commit it as a seed with the fix.
	@for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; rest=$${t#*:}; target=$${rest%%:*}; \
		budget=$(or $(FUZZ_TIME),$${rest#*:}x); echo "go test -fuzz $$target $$pkg ($$budget)"; \
		go test "$$pkg" -run '^$$' -fuzz "^$$target$$" -fuzztime $$budget -fuzzminimizetime $(FUZZ_MINIMIZE) || exit 1; done

.PHONY: test-e2e
test-e2e: build ## Run the e2e suite on a local kwok control plane (fast: operator and controllers as host processes).
	cd e2e && E2E_TARGET=local go test -tags e2e . -count=1 -timeout 15m -v -ginkgo.v

E2E_NODE_CLUSTER := portico-e2e-node

.PHONY: test-e2e-node
test-e2e-node: $(PROMETHEUS) ## Run the e2e suite on a real node (kubelet, containerd, kube-proxy; as root): releases in the node's registry, helm and OLM installs, real pods.
	hack/testbin.sh --node >/dev/null
	@# A Traefik build make test started in the background goes on at
	@# normal priority: the suite's Gateway API specs wait for it.
	@# The build may have ended already (its process gone): the recipe's
	@# shell stops at a failing redirection, so each step may fail.
	@for f in $(TRAEFIK_BUILD_PID) $(OAUTH2_PROXY_BUILD_PID) $(ISTIOD_BUILD_PID) $(OLMV1_BUILD_PID); do if [ -s $$f ]; then pid=$$(cat $$f); rm -f $$f; \
		{ echo 0 >/proc/$$pid/autogroup; } 2>/dev/null || true; renice -n 0 -g $$pid >/dev/null 2>&1 || true; fi; done
	@# The suite removes the node when it ends; `node.sh down` again catches
	@# a suite killed before its AfterSuite (e.g. by go test's -timeout).
	status=0; (cd e2e && E2E_TARGET=node PROMETHEUS=$(PROMETHEUS) go test -tags e2e . -count=1 -timeout 40m -v -ginkgo.v -ginkgo.timeout 35m) || status=$$?; \
		hack/node.sh down $(E2E_NODE_CLUSTER) || true; exit $$status

TRAEFIK_BUILD_PID := $(LOCALBIN)/traefik-build.pid

.PHONY: traefik-background
traefik-background: ## Start building Traefik (hack/traefik.sh, cached) in the background on idle CPU only (a session of its own at nice 19, so it cannot take the CPU from make's builds); its log is bin/traefik-build.log.
	@mkdir -p $(LOCALBIN)
	@if [ -x "$$(hack/traefik.sh --path)" ]; then exit 0; fi; \
		echo "hack/traefik.sh in the background at nice 19 (log: $(LOCALBIN)/traefik-build.log)"; \
		setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; renice -n 19 -p $$$$ >/dev/null 2>&1; exec hack/traefik.sh' \
			</dev/null >$(LOCALBIN)/traefik-build.log 2>&1 & echo $$! >$(TRAEFIK_BUILD_PID)

OAUTH2_PROXY_BUILD_PID := $(LOCALBIN)/oauth2-proxy-build.pid

.PHONY: oauth2-proxy-background
oauth2-proxy-background: ## Start building oauth2-proxy (hack/oauth2proxy.sh, cached), the node e2e's OIDC login authorizer, in the background on idle CPU only, as traefik-background; its log is bin/oauth2-proxy-build.log.
	@mkdir -p $(LOCALBIN)
	@if [ -x "$$(hack/oauth2proxy.sh --path)" ]; then exit 0; fi; \
		echo "hack/oauth2proxy.sh in the background at nice 19 (log: $(LOCALBIN)/oauth2-proxy-build.log)"; \
		setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; renice -n 19 -p $$$$ >/dev/null 2>&1; exec hack/oauth2proxy.sh' \
			</dev/null >$(LOCALBIN)/oauth2-proxy-build.log 2>&1 & echo $$! >$(OAUTH2_PROXY_BUILD_PID)

ISTIOD_BUILD_PID := $(LOCALBIN)/istiod-build.pid

.PHONY: istiod-background
istiod-background: ## Start building istiod (hack/istiod.sh: pilot-discovery from test/istio's Istio pin, cached), the node e2e's Istio control plane, in the background on idle CPU only, as traefik-background; its log is bin/istiod-build.log.
	@mkdir -p $(LOCALBIN)
	@if [ -x "$$(hack/istiod.sh --path)" ]; then exit 0; fi; \
		echo "hack/istiod.sh in the background at nice 19 (log: $(LOCALBIN)/istiod-build.log)"; \
		setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; renice -n 19 -p $$$$ >/dev/null 2>&1; exec hack/istiod.sh' \
			</dev/null >$(LOCALBIN)/istiod-build.log 2>&1 & echo $$! >$(ISTIOD_BUILD_PID)

OLMV1_BUILD_PID := $(LOCALBIN)/olmv1-build.pid

.PHONY: olmv1-background
olmv1-background: ## Start building OLM v1 (hack/olmv1.sh: operator-controller and catalogd from hack/tools/olmv1, cached), the node e2e's OLM v1, in the background on idle CPU only, as traefik-background; its log is bin/olmv1-build.log.
	@mkdir -p $(LOCALBIN)
	@if [ -f "$$(hack/olmv1.sh --path)/.complete" ]; then exit 0; fi; \
		echo "hack/olmv1.sh in the background at nice 19 (log: $(LOCALBIN)/olmv1-build.log)"; \
		setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; renice -n 19 -p $$$$ >/dev/null 2>&1; exec hack/olmv1.sh' \
			</dev/null >$(LOCALBIN)/olmv1-build.log 2>&1 & echo $$! >$(OLMV1_BUILD_PID)

.PHONY: test-e2e-kind
test-e2e-kind: ## Run the e2e suite on kind with real images (needs Docker and kind).
	cd e2e && E2E_TARGET=kind go test -tags e2e . -count=1 -timeout 30m -v -ginkgo.v

##@ Benchmarks

# BENCH_ARGS are extra flags of the benchmark (go run ./test/perf/<bench>
# --help). Every run writes its results as PerfData JSON to PERF_DIR, with
# the machine (CPUs, CPU model, the floor's time), and compares them with
# the baseline in test/perf/baseline: it fails only when a gated figure --
# a ratio of the same run (a phase over its floor), a count (requests,
# reconciles, writes, allocations) or memory -- regressed beyond the
# tolerance (--tolerance, 15%); absolute times and CPU seconds are printed
# as information, never gated, with how this machine's floor compares with
# the baseline's. BENCH_UPDATE_BASELINE=1 writes the results as the new
# baseline instead.
BENCH_ARGS ?=
BENCH_UPDATE_BASELINE ?=
PERF_DIR ?= $(LOCALBIN)/perf
BENCH_RESULT_FLAGS = $(if $(BENCH_UPDATE_BASELINE),--update-baseline)
# The clusters of bench-short (test/perf/*/main.go, shortOptions).
PERF_SHORT_CLUSTERS := portico-perf-short-ctrl portico-perf-short-op

.PHONY: bench
bench: build ## Measure the operator's reaction times and idle writes on the local kwok cluster portico-bench; compare with test/perf/baseline/operator.json, gating the idle writes only (times are information) (BENCH_ARGS="--cycles 30 --steady 60s --down", BENCH_UPDATE_BASELINE=1).
	go run ./test/perf/operator --operator $(LOCALBIN)/portico-operator --output $(PERF_DIR)/operator.json \
		--baseline test/perf/baseline/operator.json $(BENCH_RESULT_FLAGS) $(BENCH_ARGS)

.PHONY: bench-memory
bench-memory: ## Measure the heap of the operator's CRD cache with 0 and 500 large CRDs (envtest); compare with test/perf/baseline/memory.json, gating the memory figures (BENCH_UPDATE_BASELINE=1).
	KUBEBUILDER_ASSETS="$$(hack/testbin.sh)" go test ./operator/internal/reconciler/ -run '^$$' -bench BenchmarkCRDCacheMemory -benchtime 1x \
		| go run ./test/perf/gobench --skip ns/op --output $(PERF_DIR)/memory.json --baseline test/perf/baseline/memory.json $(BENCH_RESULT_FLAGS)

.PHONY: bench-controllers
bench-controllers: build ## Measure how long the apirule/ratelimit controllers take to converge 1,000 APIRules (Istio mode, then HTTPRoute mode) and 1,000 RateLimits over 50 gateways, and their peak memory, on the local kwok cluster portico-bench-ctrl; compare with test/perf/baseline/controllers.json, gating ratios to the floor, request and reconcile counts and memory, never times (BENCH_ARGS="--apirules 1000 --ratelimits 1000 --gateways 50 --down", BENCH_UPDATE_BASELINE=1).
	go run ./test/perf/controllers --bin $(LOCALBIN) --output $(PERF_DIR)/controllers.json \
		--baseline test/perf/baseline/controllers.json $(BENCH_RESULT_FLAGS) $(BENCH_ARGS)

# The 10,000 scale of issue 29: 10,000 APIRules of each mode in 500
# namespaces (20,000 Services) next to their control plane's floor, with
# its own baseline (a missing baseline file means the results are reported
# without comparison).
BENCH_10K_ARGS := --apirules 10000 --namespaces 500 --ratelimits 1000 --gateways 50 --flood 500 --timeout 45m

.PHONY: bench-controllers-10k
bench-controllers-10k: build ## bench-controllers at 10,000 APIRules per mode in 500 namespaces (45m per wait); compare with test/perf/baseline/controllers-10k.json (BENCH_ARGS adds flags, BENCH_UPDATE_BASELINE=1).
	go run ./test/perf/controllers --bin $(LOCALBIN) --output $(PERF_DIR)/controllers-10k.json \
		--baseline test/perf/baseline/controllers-10k.json $(BENCH_RESULT_FLAGS) $(BENCH_10K_ARGS) $(BENCH_ARGS)

.PHONY: bench-ratelimit-service
bench-ratelimit-service: ## Measure the global rate-limit service in-process against a real redis-server (hack/redis.sh): p50/p99 and decisions/s of a no-Redis baseline, fixed window, token bucket and 10,000 client keys, and Redis memory per key; gates only ratios to the same run's baseline and memory (BENCH_ARGS="--duration 10s --clients 64").
	go run ./controllers/ratelimitservice/internal/bench --redis-server "$$(hack/redis.sh)" --output $(PERF_DIR)/ratelimit-service.txt $(BENCH_ARGS)

.PHONY: bench-short
bench-short: build ## Run bench and bench-controllers in their short mode (few objects, each on a kwok cluster of its own, deleted at the end); asserts convergence and results, never speed. make test runs it.
	@# The clusters go also when go test's -timeout killed a benchmark
	@# before it could delete its own.
	status=0; PORTICO_PERF_SHORT=1 go test ./test/perf/... -run '^TestShort$$' -count=1 -p 1 -timeout 8m -v || status=$$?; \
		for c in $(PERF_SHORT_CLUSTERS); do hack/cluster.sh down $$c >/dev/null 2>&1 || true; done; exit $$status

##@ Run

.PHONY: run
run: ## Run the whole product on a local real node (as root): images, chart, Istio's and the Gateway API's CRDs, the APIGateway, Traefik as the Gateway API implementation; then `kubectl apply -f config/samples/` (and config/samples/gateway-api/).
	hack/run.sh

.PHONY: run-istio
run-istio: ## Apply the real Istio CRDs to the `make run` cluster.
	hack/run.sh install-istio

.PHONY: run-istio-remove
run-istio-remove: ## Delete the Istio CRDs from the `make run` cluster.
	hack/run.sh remove-istio

.PHONY: run-down
run-down: ## Remove the node and cluster started by `make run` (every process, mount, interface and iptables chain).
	hack/node.sh down

##@ Tools

$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(LOCALBIN)/controller-gen $@

$(GOLANGCI_LINT):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	mv $(LOCALBIN)/golangci-lint $@

$(PROMTOOL) $(PROMETHEUS) &:
	@mkdir -p $(LOCALBIN)/prometheus-build
	cd test/monitoring && go build -tags $(PROMETHEUS_TAGS) -o $(LOCALBIN)/prometheus-build/ \
		github.com/prometheus/prometheus/cmd/prometheus github.com/prometheus/prometheus/cmd/promtool
	mv $(LOCALBIN)/prometheus-build/promtool $(PROMTOOL)
	mv $(LOCALBIN)/prometheus-build/prometheus $(PROMETHEUS)

.PHONY: prometheus
prometheus: $(PROMETHEUS) ## Build the Prometheus server (and promtool) the node e2e runs, and print its path.
	@echo $(PROMETHEUS)

$(ACTIONLINT):
	@mkdir -p $(LOCALBIN)
	GOBIN=$(LOCALBIN) go install github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION)
	mv $(LOCALBIN)/actionlint $@
