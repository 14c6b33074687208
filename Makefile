# Alfred. `make run` plays the demo (no forge configured) or serves (a forge configured);
# `make test` runs every test. Both install and start what they need (scripts/dev-deps.sh).

# bash, for pipefail in the test recipe (go test's own exit status counts, not only the formatter's).
SHELL := /bin/bash

# go from PATH, else Go's default install directory (scripts/dev-deps.sh checks the version).
GO       ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
CONFIG   ?= alfred.yaml
# Extra build tags for the tests, e.g. TEST_TAGS=docker.
TEST_TAGS ?=
# Every build and test without cgo: Alfred needs none (its SQLite is modernc.org/sqlite, pure
# Go), its binaries are then static (the images' too), and one setting everywhere lets the
# builds of make run, make test and the binaries the tests build share the build cache.
export CGO_ENABLED := 0
# And every build and test with -trimpath: without it the compiled packages hold their source
# directory, so Go's build cache misses every package of a clone at another path (a fresh
# clone's vet, builds and test compiles: 221 CPU-seconds and 2 minutes on the 2-core machine,
# against 83 and 48 s with it once the cache holds the tree; docs/testing.md).
export GOFLAGS := -trimpath $(filter-out -trimpath,$(GOFLAGS))

# The database the PostgreSQL tests use (internal/base/pgtest); scripts/dev-deps.sh creates it.
ALFRED_TEST_DATABASE_URL ?= postgres://alfred:alfred-dev-7Kq2vN9x@127.0.0.1:5432/alfred_test?sslmode=disable
export ALFRED_TEST_DATABASE_URL

SCRIPT_AGENT_IMAGE ?= alfred/script-agent:dev
# make demo / make run (no forge): how the stand-in's changes reach Alfred, webhook or poll (alfred demo --transport)
DEMO_TRANSPORT ?= webhook
# More flags of alfred demo (alfred demo -h), e.g. its addresses when the default ports are
# taken: DEMO_FLAGS='--listen 127.0.0.1:9080 --admin-listen 127.0.0.1:9081 --forge-listen 127.0.0.1:9082'
DEMO_FLAGS ?=

# The single-node Kubernetes the Kubernetes runtime's tests use (scripts/test-cluster.sh, which
# writes its kubeconfig under ALFRED_K8S_DIR). ALFRED_DEPS_SKIP_KUBERNETES=1 neither builds nor
# starts it, and those tests then skip (or fail, with CI set).
ALFRED_K8S_DIR ?= /tmp/alfred-k8s
export ALFRED_K8S_DIR
ifeq ($(ALFRED_DEPS_SKIP_KUBERNETES),1)
TEST_CLUSTER :=
else
TEST_CLUSTER := cluster
ALFRED_TEST_KUBECONFIG ?= $(ALFRED_K8S_DIR)/etc/admin.kubeconfig
export ALFRED_TEST_KUBECONFIG
endif

.PHONY: all build deps cluster cluster-down test demo serve bench bench-kubernetes bench-ingest bench-process fuzz run image script-agent-image realcli-test clean

all: build

## build: bin/alfred and the static bin/alfred-script-agent
# bin/alfred is built with the GOFLAGS above (-trimpath), so that it shares the build cache
# with make test.
build:
	@echo "build: bin/alfred (a first build compiles about 900 packages: Kubernetes' client, the model SDKs, SQLite; minutes on an idle 2-core machine, far longer on a loaded one; later builds take seconds)"
	@bash scripts/timed.sh "go build bin/alfred" $(GO) build -ldflags '$(LDFLAGS)' -o bin/alfred ./cmd/alfred
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/alfred-script-agent ./cmd/alfred-script-agent

## deps: install and start PostgreSQL, Docker and git (Debian; needs root or sudo)
deps:
	bash scripts/dev-deps.sh

## cluster: build (once per machine, into /var/cache/alfred-k8s) and start the single-node Kubernetes the runtime's tests use
cluster:
	bash scripts/test-cluster.sh up

## cluster-down: stop the test cluster and remove its state
cluster-down:
	bash scripts/test-cluster.sh down

## test: install/start PostgreSQL, Docker and the test cluster if needed, check gofmt, vet and run every test against them, then every fuzz target for TEST_FUZZTIME
# A count, not a duration: Go 1.26's fuzzing coordinator can fail a run whose duration ends
# while a worker is mid-execution ("context deadline exceeded", no failing input;
# go.dev/issue/75804, fixed in Go 1.27). 500 executions take about a second a target.
TEST_FUZZTIME ?= 500x
# TEST_JSON=FILE keeps go test's events (go test -json) of make test in FILE: each test's time.
TEST_JSON ?=
# How many tests of one package run at once (go test -parallel; its default is the number of
# cores). cmd/alfred's end-to-end tests spend most of their time waiting on containers, the
# forge stand-in and the store, so more of them than cores overlap their waits.
TEST_PARALLEL ?= 4
# go test -json through alfred-testprogress: each package is printed as it ends (go test's text
# output holds them all back behind the slowest first one, cmd/alfred), and every minute the
# packages still running. go test links every package's test binary anew (its link is not
# cached): -ldflags=-w leaves out the DWARF tables nobody reads here, about a third of a link's
# CPU; -vet=off because go vet ./... has just run every analyzer go test's vet would.
# The alfred binary the tests run as a process (cmd/alfred's, webhook's and the deploy test's,
# which also puts it in Alfred's image) is linked once here, static, and handed to them
# (internal/base/servetest's ALFRED_TEST_BINARY), so that the packages that run it do not each
# link their own.
test: deps $(TEST_CLUSTER)
	@unformatted=$$("$$(dirname $(GO))/gofmt" -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
		if [ -n "$$unformatted" ]; then echo "gofmt -w these files: $$unformatted"; exit 1; fi
	$(GO) vet -tags '$(TEST_TAGS)' ./...
	$(GO) build -o bin/alfred-testprogress ./cmd/alfred-testprogress
	$(GO) build -ldflags=-w -o bin/alfred-test ./cmd/alfred
	set -o pipefail; ALFRED_TEST_BINARY=$(CURDIR)/bin/alfred-test $(GO) test -json -tags '$(TEST_TAGS)' -vet=off -ldflags=-w -count=1 -p 2 -parallel $(TEST_PARALLEL) -timeout 40m ./... | tee $(or $(TEST_JSON),/dev/null) | ./bin/alfred-testprogress
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

# The cost benchmarks report medians and ratios over a fixed number of iterations, one package
# at a time.
COST_BENCH      := BenchmarkWorktree|BenchmarkLease|BenchmarkBackgroundQueries|BenchmarkTriggerToAgent$$
COST_BENCH_RUNS ?= 20

## bench: install/start PostgreSQL and Docker if needed, then run the benchmarks only (the cost benchmarks $(COST_BENCH_RUNS) iterations each; the Kubernetes runtime's are bench-kubernetes)
bench: deps
	$(GO) test -tags '$(TEST_TAGS)' -run '^$$' -bench . -skip '$(COST_BENCH)|Kubernetes' -benchmem -count=1 ./...
	$(GO) test -tags '$(TEST_TAGS)' -run '^$$' -bench '$(COST_BENCH)' -benchtime $(COST_BENCH_RUNS)x -count=1 -p 1 ./...

# Iterations of the Kubernetes runtime's benchmarks: trigger → agent started (about 15 s each)
# and mailbox throughput (a round with 1 replica and one with 3, about 70 s each a phase kind).
KUBE_TRIGGER_RUNS    ?= 10
KUBE_THROUGHPUT_RUNS ?= 3

## bench-kubernetes: install/start PostgreSQL, Docker and the test cluster if needed, then the Kubernetes runtime's benchmarks: trigger → agent started next to a bare Pod ($(KUBE_TRIGGER_RUNS) iterations), mailboxes analysed per second by 1 and 3 replicas ($(KUBE_THROUGHPUT_RUNS))
bench-kubernetes: deps cluster
	$(GO) test -run '^$$' -bench 'BenchmarkTriggerToAgentKubernetes' -benchtime $(KUBE_TRIGGER_RUNS)x -count=1 -timeout 60m ./cmd/alfred/
	$(GO) test -run '^$$' -bench 'BenchmarkMailboxThroughputKubernetes' -benchtime $(KUBE_THROUGHPUT_RUNS)x -count=1 -timeout 60m ./cmd/alfred/

## bench-ingest: install/start PostgreSQL and Docker if needed, then the alfred serve binary's ingest on PostgreSQL and SQLite at 1, 8 and 32 senders next to pgbench inserting the same rows, and its resident set; then the floor: a bare Go handler inserting each delivery with one statement, next to pgbench
bench-ingest: deps
	$(GO) test -run '^$$' -bench 'IngestVsPgbench|IngestFloor' -benchtime 15000x -count=1 ./webhook/

## bench-process: install/start PostgreSQL if needed, then deliveries stored/s next to events processed/s by the workers, at 8 and 32 senders over 50 mailboxes and at 8 over 1,000 (one delivery each), on PostgreSQL and SQLite
bench-process: deps
	$(GO) test -run '^$$' -bench 'IngestVsProcessing/./senders/mailboxes=50' -benchtime 3000x -count=1 ./webhook/
	$(GO) test -run '^$$' -bench 'IngestVsProcessing/./senders/mailboxes=each' -benchtime 1000x -count=1 ./webhook/

## fuzz: run every fuzz target for FUZZTIME each (`go test` runs their seed corpus)
FUZZTIME ?= 30s
# How many packages' fuzz targets run at once (scripts/fuzz.sh links each package's fuzzing
# binary once): mostly the link, one core each.
FUZZ_JOBS ?= 2
FUZZ_TARGETS := \
	./webhook:FuzzReceiver ./webhook:FuzzReceiverStore ./webhook:FuzzNormalise \
	./webhook/forgejo:FuzzFastDecode ./webhook/gitlab:FuzzFastDecode \
	./mailbox:FuzzParseReply ./mailbox:FuzzMarkersAndSections ./mailbox:FuzzSplitComment \
	./runner/phase:FuzzDecodeResult ./runner/agent/script:FuzzParse \
	./runner/agent/internal/clikit:FuzzLinesAndJSONObject \
	./runner/agent/claudecode:FuzzParseStream ./runner/agent/codex:FuzzParseStream \
	./runner/agent/copilot:FuzzParseStream ./runner/agent/gemini:FuzzParseStream \
	./runner/agent/opencode:FuzzParseStream ./internal/config:FuzzLoad \
	./internal/base/censor:FuzzString
fuzz:
	@GO=$(GO) bash scripts/fuzz.sh $(FUZZTIME) $(FUZZ_JOBS) $(FUZZ_TARGETS)

## run: with a forge configured ($(CONFIG) and its bot's token file), bring up Docker (and PostgreSQL only when $(CONFIG) or ALFRED_DATABASE_URL names a PostgreSQL database; none or sqlite:PATH = embedded SQLite), build, build the script agent image, check (alfred doctor), serve with $(CONFIG). With none, prepare its files (scripts/demo-files.sh) and play the demo instead (make demo)
run:
	@CONFIG=$(CONFIG) bash scripts/demo-files.sh; rc=$$?; \
		if [ $$rc -eq 3 ]; then exec $(MAKE) --no-print-directory demo; fi; \
		if [ $$rc -ne 0 ]; then exit $$rc; fi; \
		exec $(MAKE) --no-print-directory serve

# serve: what make run does with a forge configured.
serve:
	@if grep -E '^[[:space:]]*database_url(_file)?:[[:space:]]*["'"'"']?[^[:space:]#"'"'"']' $(CONFIG) | grep -Evq 'database_url:[[:space:]]*["'"'"']?sqlite:' || [ -n "$${ALFRED_DATABASE_URL:-}$${ALFRED_DATABASE_URL_FILE:-}" ]; then \
		ALFRED_DEPS_SKIP_BROWSER=1 bash scripts/dev-deps.sh; \
	else \
		ALFRED_DEPS_SKIP_POSTGRES=1 ALFRED_DEPS_SKIP_BROWSER=1 bash scripts/dev-deps.sh; \
	fi
	$(MAKE) build script-agent-image
	@./bin/alfred doctor --config $(CONFIG) || { echo "make run: fix the failures above (each says how), then make run again"; exit 1; }
	./bin/alfred serve --config $(CONFIG)

## demo: no forge needed: bring up Docker, build, build the script agent image, then play one issue from its assignment to a merged pull request on a stand-in Forgejo (alfred demo; its files in alfred-demo/). DEMO_TRANSPORT=poll (make demo DEMO_TRANSPORT=poll, make run DEMO_TRANSPORT=poll): the stand-in has no webhook and Alfred polls it (transport: poll)
demo:
	@ALFRED_DEPS_SKIP_POSTGRES=1 ALFRED_DEPS_SKIP_BROWSER=1 bash scripts/dev-deps.sh
	$(MAKE) --no-print-directory build script-agent-image
	./bin/alfred demo --image $(SCRIPT_AGENT_IMAGE) --transport $(DEMO_TRANSPORT) $(DEMO_FLAGS)

## script-agent-image: build $(SCRIPT_AGENT_IMAGE) offline (static binary in a FROM scratch image)
script-agent-image:
	rm -rf bin/script-agent-image && mkdir -p bin/script-agent-image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/script-agent-image/alfred-script-agent ./cmd/alfred-script-agent
	printf 'FROM scratch\nCOPY alfred-script-agent /alfred-script-agent\nUSER 65532:65532\nENTRYPOINT ["/alfred-script-agent"]\n' > bin/script-agent-image/Dockerfile
	docker build -q -t $(SCRIPT_AGENT_IMAGE) bin/script-agent-image

## image: build the container image alfred:$(VERSION) (needs a Docker engine with BuildKit: deploy/Dockerfile uses RUN --mount)
image:
	DOCKER_BUILDKIT=1 docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t alfred:$(VERSION) .

## realcli-test: install the real agent CLIs from npm into $(REALCLI_DIR) and run the adapters against them (host, mock model; -update via REALCLI_ARGS)
# Claude Code 2.1.197 is the last release whose engines allow Node < 22 (spec/agents.md §1 Install note).
# The list holds every CLI that runner/agent/realcli tests.
REALCLI_DIR  ?= .cache/realcli
REALCLI_NPM  ?= @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33 @github/copilot@1.0.102
REALCLI_ARGS ?=
# Each CLI gets an equal share of the package's -timeout (at least 8 minutes: one CLI's --version
# took 81 s on a loaded machine); go test's default of 10 minutes is refused by the tests.
REALCLI_TIMEOUT ?= 60m
realcli-test:
	mkdir -p $(REALCLI_DIR)
	npm install --prefix $(REALCLI_DIR) --no-audit --no-fund --save-exact --include=optional $(REALCLI_NPM)
	ALFRED_REALCLI_DIR=$(abspath $(REALCLI_DIR)) $(GO) test -tags realcli -count=1 -timeout $(REALCLI_TIMEOUT) ./runner/agent/realcli/ -v $(REALCLI_ARGS)

clean:
	rm -rf bin/
