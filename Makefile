# runner-reaper. `make demo` shows it working; `make test` proves it.
SHELL := /bin/bash
GO ?= go
CACHE := $(CURDIR)/.cache
ASSETS := $(CACHE)/envtest
BIN := $(CURDIR)/bin
DIST := $(CURDIR)/dist
KUBE_APISERVER := $(CACHE)/bin/kube-apiserver
# The real single-node cluster's other binaries (k8s-cronjob/cluster).
CLUSTER_BINS := $(CACHE)/bin/kubelet $(CACHE)/bin/kube-scheduler $(CACHE)/bin/kube-controller-manager
export KUBEBUILDER_ASSETS := $(ASSETS)

.PHONY: all build test unit bench arc-manager chaos vet deadcode docs demo demo-monitoring demo-build control-plane envtest-assets deps dynalite openapi package image push ca-bundle cluster-assets clean
DYNALITE := tools/dynalite/node_modules/dynalite/cli.js

all: build

# Each test tool's build lives in a fragment of its own (mk/*.mk); a
# fragment adds what `make test` needs to TEST_ASSETS.
TEST_ASSETS :=
include $(wildcard mk/*.mk)

# The version and git revision every build links in: `runner-reaper
# --version` prints them and each sweep's summary line carries them.
# Override with `make image VERSION=v1.2.3`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_PKG := github.com/runner-reaper/runner-reaper/report
LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)
# How the shipped binaries (image, package, release) are built: no symbol
# table or DWARF, no build ID, no paths of the machine, and no stamp of the
# checkout's state (which counts untracked files; REVISION is linked in
# instead), so that with CGO_ENABLED=0 the bytes are the source's and the
# toolchain's alone.
BIN_LDFLAGS := -s -w -buildid= $(LDFLAGS)
BIN_GOFLAGS := -trimpath -buildvcs=false

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/runner-reaper ./functions/cli

# Debian packages the tests need; installed only when missing, so the second
# run on a machine costs nothing.
# kubectl comes with the machine image; Debian's kubernetes-client stands in
# where it does not. shellcheck (2.6 MB) is for `make lint-workflows`:
# actionlint checks the workflows' run: scripts with it when it is on PATH.
# zip makes the Lambda's package as CI does, which `make release` requires.
deps:
	@pkgs=""; \
	command -v kubectl >/dev/null 2>&1 || pkgs="$$pkgs kubernetes-client"; \
	command -v npm >/dev/null 2>&1 || pkgs="$$pkgs nodejs npm"; \
	command -v containerd >/dev/null 2>&1 || pkgs="$$pkgs containerd"; \
	command -v runc >/dev/null 2>&1 || pkgs="$$pkgs runc"; \
	test -x /usr/lib/cni/bridge || pkgs="$$pkgs containernetworking-plugins"; \
	command -v unshare >/dev/null 2>&1 || pkgs="$$pkgs util-linux"; \
	command -v ip >/dev/null 2>&1 || pkgs="$$pkgs iproute2"; \
	command -v shellcheck >/dev/null 2>&1 || pkgs="$$pkgs shellcheck"; \
	command -v zip >/dev/null 2>&1 || pkgs="$$pkgs zip"; \
	if [ -n "$$pkgs" ]; then \
		echo "installing from Debian:$$pkgs"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs >/dev/null; \
	fi

# $(call timed,WHAT,COMMAND) runs COMMAND, a build of WHAT, saying once a
# minute that it is still at it and at the end how long it took: a first
# build of kube-apiserver is minutes of silence otherwise.
timed = start=$$(date +%s); \
	( while sleep 60 >/dev/null 2>&1; do echo "    ... still building $(1), $$(( ($$(date +%s) - start) / 60 )) min so far"; done ) & ticker=$$!; \
	$(2); status=$$?; kill $$ticker 2>/dev/null; \
	if [ $$status = 0 ]; then echo "    $(1) built in $$(( $$(date +%s) - start ))s"; fi; exit $$status

# The control plane's binaries are built without DWARF (-dwarf=false): no
# one debugs them, and leaving it out is a tenth of their compiler's work.
# kube-apiserver, etcd and the real cluster's binaries share the flag, so
# that what they have in common is compiled once.
CONTROL_PLANE_GCFLAGS := -gcflags=all=-dwarf=false

# kube-apiserver is built from the k8s.io/kubernetes module in a tools module
# of its own (about three minutes the first time on two cores), then reused.
$(KUBE_APISERVER): tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@echo "building kube-apiserver for the test control plane (first time: about three minutes on two cores, more beside other builds)"
	@$(call timed,kube-apiserver,cd tools/kube-apiserver && GONOSUMDB='k8s.io/*' $(GO) build $(CONTROL_PLANE_GCFLAGS) -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver)

# etcd is built from the etcd module at the version Kubernetes v1.32.4
# pins, in a tools module of its own (about half a minute the first time):
# Debian's 3.4.23 predates the watch-progress fixes kube-apiserver needs
# before it serves consistent reads from its watch cache, as production
# clusters do (see tools/etcd/main.go).
ETCD := $(CACHE)/bin/etcd
$(ETCD): tools/etcd/go.mod tools/etcd/go.sum tools/etcd/main.go
	@echo "building etcd for the test control plane (first time: about half a minute)"
	@$(call timed,etcd,cd tools/etcd && $(GO) build $(CONTROL_PLANE_GCFLAGS) -o $(ETCD) .)

# actions-runner-controller's manager (v0.27.6, the newest the Go module
# proxy serves), built from its module in a tools module of its own (about
# a minute the first time), then reused: test/testenv runs it in scale-set
# mode against the test control plane and the GitHub simulator.
ARC_MANAGER := $(CACHE)/bin/arc-manager
$(ARC_MANAGER): tools/arc/go.mod tools/arc/go.sum
	@echo "building actions-runner-controller's manager for the ARC tests (first time: about a minute)"
	cd tools/arc && $(GO) build -o $(ARC_MANAGER) github.com/actions/actions-runner-controller

arc-manager: $(ARC_MANAGER)

# kubelet, kube-scheduler and kube-controller-manager for the real cluster,
# from the same module and version, built once into the same place.
$(CLUSTER_BINS): tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@echo "building $(notdir $@) for the real-cluster tests (first time: a few minutes)"
	cd tools/kube-apiserver && GONOSUMDB='k8s.io/*' $(GO) build $(CONTROL_PLANE_GCFLAGS) -o $@ k8s.io/kubernetes/cmd/$(notdir $@)

# The real cluster's binaries; containerd, runc and the CNI plugins of the
# pod network some of its tests need (bridge, host-local, loopback) come
# from Debian (deps).
cluster-assets: deps $(CLUSTER_BINS)

# The control plane envtest starts, kube-apiserver and etcd, where it looks
# for them: all `make demo` needs of it, with no root and no Debian package.
control-plane: $(KUBE_APISERVER) $(ETCD)
	@mkdir -p $(ASSETS)
	@ln -sf $(KUBE_APISERVER) $(ASSETS)/kube-apiserver
	@ln -sf $(ETCD) $(ASSETS)/etcd

# The tests' assets add kubectl, for the manifests they render.
envtest-assets: deps control-plane
	@ln -sf $$(command -v kubectl) $(ASSETS)/kubectl

# dynalite, the DynamoDB-compatible server the ledger's tests run against,
# from the npm registry at the version the committed lockfile pins.
$(DYNALITE): tools/dynalite/package.json tools/dynalite/package-lock.json | deps
	npm ci --prefix tools/dynalite --no-audit --no-fund
	@touch $(DYNALITE)

dynalite: $(DYNALITE)

# GitHub's published REST API description (@octokit/openapi), pinned by the
# committed lockfile; the contract tests check the simulator's answers and
# the client's requests against it.
OPENAPI := tools/openapi/node_modules/@octokit/openapi/generated/ghec.json
$(OPENAPI): tools/openapi/package.json tools/openapi/package-lock.json | deps
	npm ci --prefix tools/openapi --no-audit --no-fund
	@touch $(OPENAPI)

openapi: $(OPENAPI)

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt would change:"; gofmt -l $$(git ls-files '*.go'); exit 1; }

# The references under docs/ made from the code: docs/configuration.md
# from internal/config's spec (each field's tags and comment) and
# docs/metrics.md from metrics.Families. Each is made by a test of the
# package that owns its table (test/docgen), which fails while the
# committed file differs; -write-docs writes it instead.
DOCS_PKGS := ./internal/config ./metrics
docs:
	$(GO) test -count=1 -run '^Test(Configuration|Metrics)Reference$$' $(DOCS_PKGS) -args -write-docs

# Nothing in the product exists only for its tests: deadcode (built from the
# Go module proxy) over the two entry points must find no function that
# neither reaches.
DEADCODE := golang.org/x/tools/cmd/deadcode@v0.26.0
deadcode:
	@out=$$($(GO) run $(DEADCODE) ./functions/cli ./functions/lambda) || exit 1; \
	test -z "$$out" || { echo "deadcode: reached by neither entry point:"; echo "$$out"; exit 1; }

# image first: the image and cluster tests run `make image` themselves, and
# inside the cluster's network namespace nothing can be downloaded.
# lint-workflows: the workflows cannot run here, so actionlint is what
# checks them; test/release builds the snapshot release twice and compares.
test: envtest-assets arc-manager cluster-assets image dynalite openapi $(TEST_ASSETS) vet lint deadcode lint-workflows
	$(GO) test -count=1 -timeout 30m ./...
	$(GO) run ./test/chaos/cmd/chaos -sweeps 1000

# The deterministic simulation (test/chaos), which `make unit` leaves out:
# its tests in full, then 10,000 sweeps of the real sweep in a seeded world
# of hazards, every invariant checked after every sweep. SEED=n repeats a
# run; a failure prints its shrunk reproduction.
SEED ?= 0
chaos:
	$(GO) test -count=1 ./test/chaos
	$(GO) run ./test/chaos/cmd/chaos -sweeps 10000 -seed $(SEED)

# Every test that needs no real service and no root, in -short, with
# nothing built or installed first: the tests that need the control plane,
# dynalite, GitHub's API description or a tool `make test` builds (helm,
# promtool, the Lambda emulator and the rest) skip themselves under -short,
# saying that `make test` runs them, and so does the one that builds and
# runs both entry points. Left out: the packages whose every test needs a
# real service (test/e2e, state/configmap, state/dynamo,
# k8s-cronjob/cluster), which would only skip and whose linking is most of
# their time; test/scale, a benchmark with no test; and test/chaos, whose
# simulated sweeps would be most of this target's time: `make chaos` runs
# it. `make test` runs every package, none in -short. -p 4 on two cores:
# some unit tests wait on a timeout they test, and those waits overlap the
# others' compiling and linking.
UNIT_LEAVES_OUT := /test/e2e$$|/state/configmap$$|/state/dynamo$$|/k8s-cronjob/cluster$$|/test/scale$$|/test/chaos$$
unit:
	$(GO) test -p 4 -short -count=1 $$($(GO) list ./... | grep -Ev '$(UNIT_LEAVES_OUT)')

# The pure classify-and-plan benchmark; the file ledger's save and load
# at 10,000 and 100,000 cached registrations; whole sweeps in process over a
# fleet of 10,000 realistic ARC runner pods on the real API server and
# 10,000 registrations in 100 scopes, with where the time goes; the
# compiled binary's sweeps over ARC fleets of 10,000, 50,000 and 100,000
# runners (each an EphemeralRunner, its pod and its registration, on a
# control plane of its own), cold and 5 warm, beside the same tree built
# to read through client-go's reflectors (-tags stdread), each also under
# a 128Mi limit, with their table of wall time, CPU, peak memory, ledger
# size, requests and bytes read from the API server
# (BENCH_SIZES=1000,10000 BENCH_SERVE_SIZES=none for a quick one,
# BENCH_BASELINE=old-binary to measure a change before and after on the
# same world, BENCH_LEDGER=file for the CLI's default ledger instead of the
# CronJob's ConfigMap); after the 10,000 and the 100,000 runners' sweeps,
# on the same world, two
# `runner-reaper serve` replicas in 256Mi cgroups while 0.1%, 1% and 10% of
# the runners are replaced a minute (and 1% again with GOGC=10 at the
# largest size), with their table of the leader's CPU, bytes read from the
# API server, peak memory and GitHub requests a minute, the churn achieved,
# the time a planted zombie takes to go, and the failover to the other
# replica after a kill -9 of the leader, against the mode's goals
# (BENCH_SERVE_SIZES, BENCH_SERVE_CHURN, BENCH_SERVE_MINUTES; see
# test/scale); the sweep time against the number of scopes at 150 ms
# a GitHub request; and the compiled binary's sweeps of one org whose
# runner list moves while it is read (orgs of 300, 2,000 and 10,000
# runners on the GitHub simulator at 150 ms a request, registering and
# removing runners 1, 5 and 20 times a second, beside a planted zombie and
# a planted unregistered pod on the real API server), with their table of
# the sweeps that judged the org, the requests a sweep (pages read, 304s,
# look-ups by name) against a quiet org's floor, and the sweeps and
# seconds the planted pods took to go (BENCH_CHURN_SIZES=300 and
# BENCH_CHURN_RATES=5 for a quick one; BENCH_BASELINE sweeps it too; see
# test/churn). About three hours on 2 cores, an estimate: 25 minutes
# building the 100,000 runners (four writes each, about 15 ms of the API
# server's CPU), an hour and a quarter sweeping the three sizes with both
# read paths, about an hour the seven serve rows (under ten minutes each,
# most of it the two planted zombies waiting out a 1-minute confirmation,
# BENCH_SERVE_CONFIRM_AFTER), and 5 minutes the churning org (7 with a
# baseline).
bench: envtest-assets
	$(GO) test -run '^$$' -bench ClassifyAndPlan -benchmem -count 5 ./reconcile/
	$(GO) test -run '^$$' -bench FileLedger -benchmem -count 3 ./state/file/
	$(GO) test -count=1 -timeout 15m -run '^$$' -bench 'SweepFleet' -benchtime 10x -benchmem ./sweep/
	BENCH_MEMORY_LIMIT=$${BENCH_MEMORY_LIMIT-128Mi} BENCH_SERVE_CONFIRM_AFTER=$${BENCH_SERVE_CONFIRM_AFTER-1m} $(GO) test -count=1 -timeout 360m -v -run '^$$' -bench 'SweepScale' -benchtime 5x ./test/scale/
	SCALE_FULL_LATENCY=1 $(GO) test -count=1 -v -run '^TestSweepTimeAgainstScopeCount$$' ./sweep/
	BENCH_CHURN=1 $(GO) test -count=1 -timeout 90m -v -run '^TestChurnTable$$' ./test/churn/

# A local control plane, a simulated GitHub, a fleet in every failure state,
# and the real binary: an audit, a sweep that marks, a sweep that reaps, the
# audit again, then each runner's fate and why, checked against what the
# sweeps reported (demo/). It builds only what it runs, and needs nothing
# but Go: no root, no Debian package, no npm. The first run is its builds:
# about six minutes on two cores, half of it kube-apiserver's, the rest
# etcd, runner-reaper and the demo; then half a minute. The builds run side
# by side (-j3): on two cores that gains little, the compiler keeping both
# busy either way, but on more it fills the cores one build leaves idle.
# demo-monitoring adds a real Pushgateway, which the sweeps push to, and a
# real Prometheus, which scrapes it and evaluates the shipped alerts; their
# first build is several minutes more.
DEMO_BIN := $(BIN)/demo
DEMO_FIRST_LINE := building kube-apiserver and etcd (a local control plane), runner-reaper and the demo, side by side: the first time about six minutes on two cores, afterwards seconds
demo:
	@echo "make demo: $(DEMO_FIRST_LINE)"
	@began=$$(date +%s) && $(MAKE) --no-print-directory -j3 control-plane demo-build && \
		$(DEMO_BIN) --binary $(BIN)/runner-reaper --began $$began

demo-monitoring:
	@echo "make demo-monitoring: $(DEMO_FIRST_LINE); then Prometheus and the Pushgateway (their first build: several minutes more)"
	@began=$$(date +%s) && $(MAKE) --no-print-directory -j3 control-plane demo-build $(PROMETHEUS) $(PUSHGATEWAY) && \
		$(DEMO_BIN) --binary $(BIN)/runner-reaper --began $$began --monitoring

demo-build:
	@echo "building runner-reaper and the demo"
	@$(call timed,runner-reaper and the demo,$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/runner-reaper ./functions/cli && $(GO) build -o $(DEMO_BIN) ./demo)

# The Lambda's deployment package: dist/runner-reaper-lambda.zip holding
# `bootstrap` at its root, for provided.al2023 on arm64 (template.yaml's
# CodeUri). The binary's mtime and mode are pinned and zip stores no extra
# attributes, so the same source gives the same zip and `sam deploy` sees no
# change. It links in VERSION and REVISION, which each summary line carries.
LAMBDA_ZIP := $(DIST)/runner-reaper-lambda.zip

package:
	@mkdir -p $(DIST)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc $(BIN_GOFLAGS) -ldflags='$(BIN_LDFLAGS)' -o $(DIST)/bootstrap ./functions/lambda
	@chmod 0755 $(DIST)/bootstrap && touch -t 198001010000 $(DIST)/bootstrap
	@rm -f $(LAMBDA_ZIP)
	@if command -v zip >/dev/null 2>&1; then \
		cd $(DIST) && zip -q -X $(LAMBDA_ZIP) bootstrap; \
	else \
		python3 -c 'import sys, zipfile; i = zipfile.ZipInfo("bootstrap", (1980, 1, 1, 0, 0, 0)); i.external_attr = 0o100755 << 16; i.compress_type = zipfile.ZIP_DEFLATED; z = zipfile.ZipFile(sys.argv[1], "w"); z.writestr(i, open(sys.argv[2], "rb").read()); z.close()' $(LAMBDA_ZIP) $(DIST)/bootstrap; \
	fi
	@echo "$(LAMBDA_ZIP): bootstrap (linux/arm64) at its root"

# The container image, FROM scratch, with no daemon and no base image to
# pull: static binaries for linux/amd64 and linux/arm64, Debian's CA bundle,
# a nonroot (65532) passwd entry, assembled by tools/image (a module of its
# own, on go-containerregistry) into one OCI image index at dist/image (an
# OCI layout), plus the amd64 image as a tarball `docker load` and
# `ctr images import` read. Same commit, same digests.
IMAGE ?= ghcr.io/runner-reaper/runner-reaper:$(VERSION)
IMAGE_LAYOUT = $(DIST)/image
IMAGE_TARBALL = $(DIST)/runner-reaper-linux-amd64.tar
IMAGE_ARCHES := amd64 arm64
CA_BUNDLE := /etc/ssl/certs/ca-certificates.crt
SOURCE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)

ca-bundle:
	@test -s $(CA_BUNDLE) || { echo "installing from Debian: ca-certificates"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ca-certificates >/dev/null; }

image: ca-bundle
	@for arch in $(IMAGE_ARCHES); do \
		GOOS=linux GOARCH=$$arch CGO_ENABLED=0 $(GO) build $(BIN_GOFLAGS) -ldflags '$(BIN_LDFLAGS)' \
			-o $(DIST)/bin/linux-$$arch/runner-reaper ./functions/cli || exit 1; \
	done
	cd tools/image && $(GO) run . build $(foreach a,$(IMAGE_ARCHES),--bin linux/$(a)=$(DIST)/bin/linux-$(a)/runner-reaper) \
		--ca $(CA_BUNDLE) --version '$(VERSION)' --revision '$(REVISION)' --created $(SOURCE_EPOCH) \
		--ref '$(IMAGE)' --layout $(IMAGE_LAYOUT) --tarball linux/amd64=$(IMAGE_TARBALL)
	@echo "$(IMAGE_LAYOUT): $(IMAGE) for $(IMAGE_ARCHES); $(IMAGE_TARBALL): linux/amd64"

# Push the image index `make image` wrote: make push IMAGE=registry/name:tag
# (credentials from docker login or a credential helper). Never run by tests.
push: image
	@test "$(origin IMAGE)" = "command line" || { echo "say where: make push IMAGE=registry/name:tag"; exit 2; }
	cd tools/image && $(GO) run . push --layout $(IMAGE_LAYOUT) --ref '$(IMAGE)'

clean:
	rm -rf $(BIN) $(CACHE)/envtest dist tools/dynalite/node_modules tools/openapi/node_modules
