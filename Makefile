# runner-reaper. `make demo` shows it working; `make test` proves it.
SHELL := /bin/bash
GO ?= go
CACHE := $(CURDIR)/.cache
ASSETS := $(CACHE)/envtest
BIN := $(CURDIR)/bin
KUBE_APISERVER := $(CACHE)/bin/kube-apiserver
export KUBEBUILDER_ASSETS := $(ASSETS)

.PHONY: all build test unit bench vet demo envtest-assets deps dynalite openapi package clean
DYNALITE := tools/dynalite/node_modules/dynalite/cli.js

all: build

build:
	$(GO) build -o $(BIN)/runner-reaper ./functions/cli

# Debian packages the tests need; installed only when missing, so the second
# run on a machine costs nothing.
# kubectl comes with the machine image; Debian's kubernetes-client stands in
# where it does not.
deps:
	@pkgs=""; \
	command -v etcd >/dev/null 2>&1 || pkgs="$$pkgs etcd-server"; \
	command -v kubectl >/dev/null 2>&1 || pkgs="$$pkgs kubernetes-client"; \
	command -v npm >/dev/null 2>&1 || pkgs="$$pkgs nodejs npm"; \
	if [ -n "$$pkgs" ]; then \
		echo "installing from Debian:$$pkgs"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkgs >/dev/null; \
	fi

# kube-apiserver is built from the k8s.io/kubernetes module in a tools module
# of its own (about five minutes the first time), then reused.
$(KUBE_APISERVER): tools/kube-apiserver/go.mod tools/kube-apiserver/go.sum
	@echo "building kube-apiserver for the test control plane (first time: about five minutes)"
	cd tools/kube-apiserver && GONOSUMDB='k8s.io/*' $(GO) build -o $(KUBE_APISERVER) k8s.io/kubernetes/cmd/kube-apiserver

envtest-assets: deps $(KUBE_APISERVER)
	@mkdir -p $(ASSETS)
	@ln -sf $(KUBE_APISERVER) $(ASSETS)/kube-apiserver
	@ln -sf $$(command -v etcd) $(ASSETS)/etcd
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

test: envtest-assets dynalite openapi vet
	$(GO) test -count=1 -timeout 30m ./...

unit:
	$(GO) test -count=1 ./reconcile/... ./ghclient/... ./state/... ./internal/config/...

# The pure classify-and-plan benchmark, then whole sweeps over a fleet of
# 10,000 realistic ARC runner pods on the real API server and 10,000
# registrations in 100 scopes: in process, with where the time goes, and
# through the compiled binary, with its table of wall time, CPU, peak RSS
# and requests (min / median / max of 5 sweeps). About 4 minutes, most of
# it applying the two fleets.
bench: envtest-assets
	$(GO) test -run '^$$' -bench ClassifyAndPlan -benchmem -count 5 ./reconcile/
	$(GO) test -count=1 -timeout 15m -run '^$$' -bench 'SweepFleet|SweepBinary' -benchtime 5x -benchmem ./sweep/

# A local control plane, a simulated GitHub, a fleet in every failure state,
# and the real binary: audit, a sweep that marks, a sweep that reaps.
demo: envtest-assets build
	$(GO) run ./demo --binary $(BIN)/runner-reaper

# The Lambda's deployment package: dist/runner-reaper-lambda.zip holding
# `bootstrap` at its root, for provided.al2023 on arm64 (template.yaml's
# CodeUri). The binary's mtime is pinned and zip stores no extra attributes,
# so the same source gives the same zip and `sam deploy` sees no change.
DIST := $(CURDIR)/dist
LAMBDA_ZIP := $(DIST)/runner-reaper-lambda.zip

package:
	@mkdir -p $(DIST)
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' -o $(DIST)/bootstrap ./functions/lambda
	@touch -t 198001010000 $(DIST)/bootstrap
	@rm -f $(LAMBDA_ZIP)
	@if command -v zip >/dev/null 2>&1; then \
		cd $(DIST) && zip -q -X $(LAMBDA_ZIP) bootstrap; \
	else \
		python3 -c 'import sys, zipfile; i = zipfile.ZipInfo("bootstrap", (1980, 1, 1, 0, 0, 0)); i.external_attr = 0o100755 << 16; i.compress_type = zipfile.ZIP_DEFLATED; z = zipfile.ZipFile(sys.argv[1], "w"); z.writestr(i, open(sys.argv[2], "rb").read()); z.close()' $(LAMBDA_ZIP) $(DIST)/bootstrap; \
	fi
	@echo "$(LAMBDA_ZIP): bootstrap (linux/arm64) at its root"

clean:
	rm -rf $(BIN) $(CACHE)/envtest dist tools/dynalite/node_modules tools/openapi/node_modules
