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

.PHONY: all build deps test bench run image clean

all: build

## build: bin/alfred and the static bin/alfred-script-agent
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/alfred ./cmd/alfred
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o bin/alfred-script-agent ./cmd/alfred-script-agent

## deps: install and start PostgreSQL, Docker and git (Debian; needs root or sudo)
deps:
	bash scripts/dev-deps.sh

## test: vet and run every test against the real PostgreSQL and Docker
test:
	$(GO) vet -tags '$(TEST_TAGS)' ./...
	$(GO) test -tags '$(TEST_TAGS)' -count=1 -p 2 -timeout 40m ./...

## bench: run the benchmarks only
bench:
	$(GO) test -tags '$(TEST_TAGS)' -run '^$$' -bench . -benchmem -count=1 ./...

## run: build, apply the migrations and serve with $(CONFIG)
run: build
	./bin/alfred migrate --config $(CONFIG)
	./bin/alfred serve --config $(CONFIG)

## image: build the container image alfred:$(VERSION) (needs a Docker engine)
image:
	docker build -f deploy/Dockerfile --build-arg VERSION=$(VERSION) -t alfred:$(VERSION) .

clean:
	rm -rf bin/
