# The GitHub Actions workflows (.github/workflows) cannot run here, so they
# are checked instead: actionlint v1.7.12, built from the Go module proxy in
# a tools module of its own (tools/actionlint, about fifteen seconds the
# first time), reads their syntax, expressions, contexts, permissions and
# the inputs of the actions it knows, and with shellcheck on PATH (`make
# deps` installs Debian's) the shell of every run: step. `make test` runs it.

.PHONY: actionlint lint-workflows

ACTIONLINT := $(CACHE)/bin/actionlint

$(ACTIONLINT): tools/actionlint/go.mod tools/actionlint/go.sum
	@echo "building actionlint for the workflows' checks (first time: about fifteen seconds)"
	cd tools/actionlint && $(GO) build -trimpath -o $@ github.com/rhysd/actionlint/cmd/actionlint

actionlint: $(ACTIONLINT)

# Every workflow, as GitHub will read it the day the repository is pushed;
# without shellcheck it says so, since the run: scripts then go unread.
lint-workflows: $(ACTIONLINT)
	@command -v shellcheck >/dev/null 2>&1 || \
		echo "lint-workflows: no shellcheck on PATH (make deps installs it): run: scripts go unchecked"
	$(ACTIONLINT) $(wildcard .github/workflows/*.yml)
