# The real Prometheus tools the monitoring tests run (test/monitoring,
# test/testenv): promtool checks and unit-tests the shipped alerts; the
# Prometheus server scrapes a real Pushgateway the way a cluster's would.
# Each is built from a tools module of its own, once, and rebuilt only when
# that module's go.mod or go.sum (or promql-names' source) changes. First
# builds, measured on two cores with a cold build cache: promtool about
# five minutes, prometheus one more (sharing promtool's packages),
# pushgateway one, promql-names seconds.
#
# Prometheus v3.16.0 (module v0.316.0) is built with -tags remove_all_sd:
# the tests need only static_configs, and leaving out the cloud service
# discoveries shortens the first build. No builtinassets: the web UI is not
# needed, only the HTTP API.
PROMETHEUS := $(CACHE)/bin/prometheus
PROMTOOL := $(CACHE)/bin/promtool
PUSHGATEWAY := $(CACHE)/bin/pushgateway
# promql-names lists what PromQL expressions select, with Prometheus's own
# parser (tools/prometheus/promql-names): test/monitoring checks that the
# alerts and the dashboard name only the metrics of metrics/names.go.
PROMQL_NAMES := $(CACHE)/bin/promql-names
PROMETHEUS_VERSION_LDFLAGS := -X github.com/prometheus/common/version.Version=3.16.0
PUSHGATEWAY_VERSION_LDFLAGS := -X github.com/prometheus/common/version.Version=1.11.0

.PHONY: prometheus-tools
prometheus-tools: $(PROMETHEUS) $(PROMTOOL) $(PUSHGATEWAY) $(PROMQL_NAMES)

$(PROMETHEUS): tools/prometheus/go.mod tools/prometheus/go.sum
	@echo "building prometheus for the monitoring tests (first time: a minute after promtool, five alone)"
	cd tools/prometheus && $(GO) build -tags remove_all_sd -ldflags '$(PROMETHEUS_VERSION_LDFLAGS)' -o $@ github.com/prometheus/prometheus/cmd/prometheus

$(PROMTOOL): tools/prometheus/go.mod tools/prometheus/go.sum
	@echo "building promtool for the monitoring tests (first time: about five minutes)"
	cd tools/prometheus && $(GO) build -tags remove_all_sd -ldflags '$(PROMETHEUS_VERSION_LDFLAGS)' -o $@ github.com/prometheus/prometheus/cmd/promtool

$(PUSHGATEWAY): tools/pushgateway/go.mod tools/pushgateway/go.sum
	@echo "building pushgateway for the monitoring tests (first time: about a minute)"
	cd tools/pushgateway && $(GO) build -ldflags '$(PUSHGATEWAY_VERSION_LDFLAGS)' -o $@ github.com/prometheus/pushgateway

$(PROMQL_NAMES): tools/prometheus/go.mod tools/prometheus/go.sum tools/prometheus/promql-names/main.go
	@echo "building promql-names for the monitoring tests (seconds once promtool is built)"
	cd tools/prometheus && $(GO) build -o $@ ./promql-names

TEST_ASSETS += $(PROMETHEUS) $(PROMTOOL) $(PUSHGATEWAY) $(PROMQL_NAMES)
