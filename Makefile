# Alfred. `make deps` once (installs and starts PostgreSQL and Docker), then `make test`.

GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
CONFIG   ?= alfred.yaml
# Extra build tags for the tests, e.g. TEST_TAGS=docker.
TEST_TAGS ?=

# The database the PostgreSQL tests use (internal/pgtest); scripts/dev-deps.sh creates it.
ALFRED_TEST_DATABASE_URL ?= postgres://alfred:alfred@127.0.0.1:5432/alfred_test?sslmode=disable
export ALFRED_TEST_DATABASE_URL

SCRIPT_AGENT_IMAGE ?= alfred/script-agent:dev

.PHONY: all build deps test bench run image script-agent-image realcli-test clean

all: build

## build: bin/alfred and the static bin/alfred-script-agent
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/alfred ./cmd/alfred
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/alfred-script-agent ./cmd/alfred-script-agent

## deps: install and start PostgreSQL, Docker and git (Debian; needs root or sudo)
deps:
	bash scripts/dev-deps.sh

## test: install/start PostgreSQL and Docker if needed, then vet and run every test against them
test: deps
	$(GO) vet -tags '$(TEST_TAGS)' ./...
	$(GO) test -tags '$(TEST_TAGS)' -count=1 -p 2 -timeout 40m ./...

## bench: run the benchmarks only
bench:
	$(GO) test -tags '$(TEST_TAGS)' -run '^$$' -bench . -benchmem -count=1 ./...

## run: bring up PostgreSQL and Docker, build, build the script agent image, serve with $(CONFIG)
run: deps build script-agent-image
	@test -f $(CONFIG) || { echo "$(CONFIG) is missing: copy deploy/alfred.example.yaml (or deploy/demo/alfred.yaml) to $(CONFIG) and set your forge's base_url, token and webhook_secret"; exit 1; }
	./bin/alfred serve --config $(CONFIG)

## script-agent-image: build $(SCRIPT_AGENT_IMAGE) offline (static binary in a FROM scratch image)
script-agent-image:
	rm -rf bin/script-agent-image && mkdir -p bin/script-agent-image
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/script-agent-image/alfred-script-agent ./cmd/alfred-script-agent
	printf 'FROM scratch\nCOPY alfred-script-agent /alfred-script-agent\nUSER 65532:65532\nENTRYPOINT ["/alfred-script-agent"]\n' > bin/script-agent-image/Dockerfile
	docker build -q -t $(SCRIPT_AGENT_IMAGE) bin/script-agent-image

## image: build the container image alfred:$(VERSION) (needs a Docker engine)
image:
	docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t alfred:$(VERSION) .

## realcli-test: install the real agent CLIs from npm into $(REALCLI_DIR) and run the adapters against them (host, mock model; -update via REALCLI_ARGS)
# Claude Code 2.1.197 is the last release whose engines allow Node < 22 (spec/agents.md §1 Install note).
# The list holds every CLI that runner/agent/realcli tests.
REALCLI_DIR  ?= .cache/realcli
REALCLI_NPM  ?= @anthropic-ai/claude-code@2.1.332 @openai/codex@0.171.0 @google/gemini-cli@0.61.0 opencode-ai@1.18.33 @github/copilot@1.0.102
REALCLI_ARGS ?=
realcli-test:
	mkdir -p $(REALCLI_DIR)
	npm install --prefix $(REALCLI_DIR) --no-audit --no-fund --save-exact --include=optional $(REALCLI_NPM)
	ALFRED_REALCLI_DIR=$(abspath $(REALCLI_DIR)) $(GO) test -tags realcli -count=1 ./runner/agent/realcli/ -v $(REALCLI_ARGS)

clean:
	rm -rf bin/
