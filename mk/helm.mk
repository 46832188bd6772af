# The Helm chart (charts/runner-reaper): Helm itself for its tests, the
# packaged chart, and its push to an OCI registry.

.PHONY: helm chart chart-version chart-push

# helm, built from helm.sh/helm/v3 in a tools module of its own (about three
# minutes the first time on two cores), then reused. The -X flags are the
# ones Helm's own Makefile sets: its version, and the Kubernetes version
# `helm template` and `helm lint` assume (the major of its client-go plus
# one, and its minor), which otherwise stays at Helm's placeholder v1.20.
HELM := $(CACHE)/bin/helm
$(HELM): tools/helm/go.mod tools/helm/go.sum
	@echo "building helm for the chart's tests (first time: about three minutes)"
	cd tools/helm && helmv=$$($(GO) list -m -f '{{.Version}}' helm.sh/helm/v3) && \
		kv=$$($(GO) list -m -f '{{.Version}}' k8s.io/client-go | sed -E 's/^v0\.([0-9]+)\..*/\1/') && \
		$(GO) build -trimpath -ldflags "-X helm.sh/helm/v3/internal/version.version=$$helmv \
			-X helm.sh/helm/v3/internal/version.gitTreeState=clean \
			-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$$kv \
			-X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$$kv" \
			-o $(HELM) helm.sh/helm/v3/cmd/helm

helm: $(HELM)

TEST_ASSETS += $(HELM)

# The chart's version is the image's version (VERSION, from git describe)
# made SemVer, which Helm requires of a chart's version; its appVersion is
# VERSION itself, the image's tag, which image.tag defaults to. The mapping
# is deterministic, in the manner of Go's pseudo-versions, and keeps git's
# order (test/helm checks both):
#
#   v1.2.3, v1.2.3-rc.1      1.2.3, 1.2.3-rc.1             (a tag: itself, without the v)
#   v1.2.3-4-gabc1234        1.2.4-0.4.gabc1234            (4 commits after v1.2.3: after it, before 1.2.4)
#   v1.2.3-rc.1-4-gabc1234   1.2.3-rc.1.0.4.gabc1234       (after the pre-release, before the next one)
#   v1.2.3-dirty             1.2.4-0.0.dirty               (the tag's tree, changed: after the tag, before its next commit)
#   v1.2.3-4-gabc1234-dirty  1.2.4-0.4.gabc1234.dirty      (after the commit, before the next)
#   e489eb0 (no tag)         0.0.0-0.ge489eb0              (the commit, as git describe names it)
#   e489eb0-dirty            0.0.0-0.ge489eb0.dirty
#   dev (no git)             0.0.0-dev
#
# Numbers are incremented as strings (v1.2.2147483647-1-g... is
# 1.2.2147483648-0.1.g...); a number Helm cannot read (above 2^64-1) is
# refused, and so is anything else that is not vMAJOR.MINOR.PATCH[-PRE],
# naming what VERSION=vX.Y.Z would fix. `make chart-version` prints it.
CHART_SEMVER = $(shell printf '%s\n' '$(VERSION)' | awk -f tools/helm/chart-semver.awk)
CHART_SEMVER_REFUSED = VERSION=$(VERSION) is not vMAJOR.MINOR.PATCH[-PRE] (numbers below 2^64), a git describe of one, a commit or dev: say VERSION=vX.Y.Z

chart-version:
	@v='$(CHART_SEMVER)'; test -n "$$v" || { echo "$(CHART_SEMVER_REFUSED)" >&2; exit 2; }; echo "$$v"

# dist/runner-reaper-SEMVER.tgz, linted first, with version and appVersion
# stamped as above. A dirty tree packages (to try it), but is never pushed.
# The chart has no default scopes, which lint would refuse: it is linted
# with an example one, as an install must give its own.
chart: $(HELM)
	@v='$(CHART_SEMVER)'; test -n "$$v" || { echo "$(CHART_SEMVER_REFUSED)" >&2; exit 2; }; \
	mkdir -p $(DIST) && \
	$(HELM) lint --quiet charts/runner-reaper --set 'scopes={org:example-org}' && \
	$(HELM) package charts/runner-reaper --version "$$v" --app-version '$(VERSION)' --destination $(DIST) >/dev/null && \
	echo "$(DIST)/runner-reaper-$$v.tgz: version $$v, appVersion $(VERSION), image $(IMAGE)"

# Push the packaged chart: make chart-push CHART_REPO=oci://registry/path
# (credentials from `helm registry login`); it lands at
# path/runner-reaper:SEMVER. Its checks come before the package is built,
# so a refused push leaves nothing behind. A dirty VERSION (git describe's
# -dirty) is refused: a chart of uncommitted changes could not be rebuilt
# from any commit. Never run by tests, which push to a registry of their
# own.
chart-push:
	@test "$(origin CHART_REPO)" = "command line" || { echo "say where: make chart-push CHART_REPO=oci://registry/path" >&2; exit 2; }
	@case '$(CHART_REPO)' in oci://*) ;; *) echo "CHART_REPO must be oci://registry/path, got $(CHART_REPO)" >&2; exit 2;; esac
	@case '$(VERSION)' in *-dirty) echo "refusing to push VERSION=$(VERSION): the tree has uncommitted changes, and no commit could rebuild this chart: commit them first" >&2; exit 2;; esac
	@$(MAKE) --no-print-directory chart
	$(HELM) push $(DIST)/runner-reaper-$(CHART_SEMVER).tgz '$(CHART_REPO)'
