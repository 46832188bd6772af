# golangci-lint over the main module: its packages, the test harness under
# test/ and every _test.go, with the linters and exclusions of
# .golangci.yml (each exclusion says why it stands). The tools/* modules
# are modules of their own and are not linted. `make test` runs it.
#
# Built from github.com/golangci/golangci-lint/v2 in a tools module of its
# own (about a minute and a half the first time on two cores), then reused.
# Its analysis cache is its own, GOLANGCI_LINT_CACHE (by default under the
# user's cache directory): with it warm a run takes seconds; with it empty,
# about a minute of CPU and over 2 GB of memory.
GOLANGCI_LINT := $(CACHE)/bin/golangci-lint

.PHONY: lint
lint: $(GOLANGCI_LINT)
	$(GOLANGCI_LINT) run ./...

$(GOLANGCI_LINT): tools/golangci-lint/go.mod tools/golangci-lint/go.sum
	@echo "building golangci-lint for make lint (first time: about a minute and a half)"
	cd tools/golangci-lint && $(GO) build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

TEST_ASSETS += $(GOLANGCI_LINT)
