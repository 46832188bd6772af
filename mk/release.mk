# A release: everything a tag ships, built into dist/release by the
# Makefile alone, reproducibly: the same commit and Go give the same bytes,
# checksums.txt included, on any machine (test/release builds a snapshot
# twice and compares). .github/workflows/release.yml runs it on a tag, then
# pushes the image and the chart, signs the image and checksums.txt, and
# publishes the release.
#
#   runner-reaper_VERSION_OS_ARCH.tar.gz        the CLI for linux and darwin, amd64 and arm64, with LICENSE and README.md
#   runner-reaper_VERSION_lambda_linux_arm64.zip the Lambda's deployment package (make package)
#   runner-reaper_VERSION_*.sbom.cdx.json       for each of those binaries, the Go modules linked into it (CycloneDX 1.6)
#   runner-reaper_VERSION_oci-image.tar         the image's OCI layout, both linux arches (`skopeo copy oci-archive:`)
#   runner-reaper-CHARTVERSION.tgz              the Helm chart (make chart; mk/helm.mk maps the version)
#   checksums.txt                               the sha256 of each; `sha256sum -c checksums.txt` checks them
#
# Every timestamp is the commit's (SOURCE_EPOCH), every owner 0, every file
# in name order, gzip without a name or time, binaries with no build ID and
# no stamp of the machine or checkout (BIN_GOFLAGS). Needs GNU tar, and
# Info-ZIP's zip (make package's fallback compresses differently).

.PHONY: release release-snapshot release-check snapshot-version

RELEASE_DIR = $(DIST)/release
RELEASE_NAME = runner-reaper_$(VERSION)
# The image's two linux binaries (make image) go into the archives too; only
# darwin's are built here.
RELEASE_DARWIN_ARCHES := amd64 arm64
RELEASE_PLATFORMS = $(foreach a,$(IMAGE_ARCHES),linux-$(a)) $(foreach a,$(RELEASE_DARWIN_ARCHES),darwin-$(a))
REPRO_TAR = tar --sort=name --mtime=@$(SOURCE_EPOCH) --owner=0 --group=0 --numeric-owner \
	--format=gnu --mode=u+rwX,go+rX,go-w
REPRO_GZIP := gzip -n -9

# cyclonedx-gomod v1.10.0, built from the Go module proxy in a tools module
# of its own (tools/cyclonedx, under a minute the first time), writes the
# SBOMs. Its bin mode reads the module list Go records in each binary, so
# an SBOM lists exactly the modules linked into what ships, with the
# binary's platform and hashes, and takes the version from -version. Its
# mod mode would take the module's version from the checkout's git (none in
# a linked worktree) and the platform from the machine's, and it leaves out
# a module whose shortest import path runs through a test even when the
# binaries link it (sigs.k8s.io/yaml, by way of apimachinery). -noserial and
# -notimestamp leave out the random serial number and the time; -trimpath:
# each SBOM carries the tool's own hashes, which must not depend on where it
# was built.
CYCLONEDX_GOMOD := $(CACHE)/bin/cyclonedx-gomod

$(CYCLONEDX_GOMOD): tools/cyclonedx/go.mod tools/cyclonedx/go.sum
	@echo "building cyclonedx-gomod for the release's SBOMs (first time: under a minute)"
	cd tools/cyclonedx && $(GO) build -trimpath -o $@ github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod

TEST_ASSETS += $(CYCLONEDX_GOMOD)

# What `make release` checks before it builds anything (tools/release/check.bash):
# VERSION given and SemVer with a leading v, GNU tar and zip, and a committed tree
# unless it is a snapshot; each refusal exits 2 and changes nothing.
release-check:
	@VERSION_ORIGIN='$(origin VERSION)' bash tools/release/check.bash

# make release VERSION=vX.Y.Z. The checks come first, in the recipe, so that
# a refused VERSION builds nothing, not even the tools. The image, the
# Lambda's package and the chart are the targets of their own; the shell
# reads VERSION from the environment (make exports one given on its command
# line), checked by then.
release:
	@VERSION_ORIGIN='$(origin VERSION)' bash tools/release/check.bash
	@rm -rf $(RELEASE_DIR) && mkdir -p $(RELEASE_DIR)
	@$(MAKE) --no-print-directory image package chart $(CYCLONEDX_GOMOD)
	@for arch in $(RELEASE_DARWIN_ARCHES); do \
		GOOS=darwin GOARCH=$$arch CGO_ENABLED=0 $(GO) build $(BIN_GOFLAGS) -ldflags '$(BIN_LDFLAGS)' \
			-o $(DIST)/bin/darwin-$$arch/runner-reaper ./functions/cli || exit 1; \
	done
	@set -o pipefail; for p in $(RELEASE_PLATFORMS); do \
		$(REPRO_TAR) -cf - -C $(CURDIR) LICENSE README.md -C $(DIST)/bin/$$p runner-reaper | $(REPRO_GZIP) \
			> $(RELEASE_DIR)/$(RELEASE_NAME)_$${p/-/_}.tar.gz || exit 1; \
	done
	@find $(IMAGE_LAYOUT) -type f -exec chmod 0644 {} + && \
		$(REPRO_TAR) -C $(IMAGE_LAYOUT) -cf $(RELEASE_DIR)/$(RELEASE_NAME)_oci-image.tar oci-layout index.json blobs
	@cp $(LAMBDA_ZIP) $(RELEASE_DIR)/$(RELEASE_NAME)_lambda_linux_arm64.zip
	@# Helm stamps each file of a package with the time it packed it: the
	@# package is unpacked and packed again the way the archives are.
	@set -o pipefail; chart=runner-reaper-$$(printf '%s\n' "$$VERSION" | awk -f tools/helm/chart-semver.awk).tgz && \
		rm -rf $(DIST)/chart-unpacked && mkdir -p $(DIST)/chart-unpacked && \
		tar -xzf $(DIST)/$$chart -C $(DIST)/chart-unpacked && \
		$(REPRO_TAR) -C $(DIST)/chart-unpacked -cf - runner-reaper | $(REPRO_GZIP) > $(RELEASE_DIR)/$$chart
	@# cyclonedx-gomod gives the purls the goos and goarch Go is set for,
	@# not the binary's: each runs set for its binary's.
	@for p in $(RELEASE_PLATFORMS) linux-arm64-lambda; do \
		bin=$(DIST)/bin/$$p/runner-reaper; name=$${p/-/_}; goos=$${p%%-*}; goarch=$${p#*-}; \
		if [ $$p = linux-arm64-lambda ]; then bin=$(DIST)/bootstrap; name=lambda_linux_arm64; goarch=arm64; fi; \
		GOOS=$$goos GOARCH=$$goarch $(CYCLONEDX_GOMOD) bin -json -noserial -notimestamp -version "$$VERSION" \
			-output $(RELEASE_DIR)/$(RELEASE_NAME)_$$name.sbom.cdx.json $$bin 2>$(DIST)/sbom.log || \
			{ cat $(DIST)/sbom.log >&2; exit 1; }; \
	done
	@cd $(RELEASE_DIR) && LC_ALL=C ls | xargs sha256sum > $(DIST)/checksums.txt && \
		mv $(DIST)/checksums.txt checksums.txt
	@cd $(RELEASE_DIR) && sha256sum --quiet -c checksums.txt && \
		echo "$(RELEASE_DIR): runner-reaper $$VERSION, sha256sum -c checksums.txt verifies:" && \
		LC_ALL=C ls -l --block-size=K | tail -n +2 | awk '{ printf "  %8s  %s\n", $$5, $$9 }'

# A snapshot release of the commit checked out, to try the release before
# tagging and for test/release to check: its version is SemVer and sorts
# below every real release (v0.0.0-snapshot.gSHA, .dirty after it when
# tracked files changed), and a dirty tree is let through.
SNAPSHOT_COMMIT = $(shell r=$$(git rev-parse --short=12 HEAD 2>/dev/null) && echo g$$r || echo dev)
SNAPSHOT_DIRTY = $(if $(shell git status --porcelain --untracked-files=no 2>/dev/null),.dirty)
SNAPSHOT_VERSION = v0.0.0-snapshot.$(SNAPSHOT_COMMIT)$(SNAPSHOT_DIRTY)

release-snapshot:
	@$(MAKE) --no-print-directory release VERSION='$(SNAPSHOT_VERSION)' RELEASE_SNAPSHOT=1

# The version `make release-snapshot` would give the release.
snapshot-version:
	@echo '$(SNAPSHOT_VERSION)'
