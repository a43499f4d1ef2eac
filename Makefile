GO ?= go
BIN := bin

.PHONY: all build test bench fmt vet clean demo demo-stop chaos-local pyimage images up down chaos

all: build

# VERSION is what wmrl --version prints; without git, wmrl falls back on
# the module's build info.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/wmrl ./starter
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/wmrl-worker ./worker
	CGO_ENABLED=0 $(GO) build -o $(BIN)/wmrl-executor ./internal/executor/wmrl-executor

vet:
	@bad=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$bad" ]; then echo "gofmt would change:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...

# workflowcheck: the workflows must replay deterministically.
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0

test: vet
	$(GO) run $(WORKFLOWCHECK) ./workflows/...
	$(GO) test -count=1 -timeout 30m ./...
	cd deploy/k8s && $(GO) test -count=1 ./...

# The slow fault tests: the whole Postgres cluster stopped for 30 s in the
# middle of a step (every client cut off, so never in make test). Needs a
# Temporal server, as .ci/run starts one.
chaos-local:
	WMRL_FAULT_TEST=1 WMRL_CHAOS_PG_CLUSTER=1 $(GO) test -count=1 -v -run 'TestFaultPostgresOutage' -timeout 20m ./workflows

bench:
	bash internal/bench/bench.sh

clean:
	rm -rf $(BIN)

demo:
	bash deploy/demo.sh

demo-stop:
	bash deploy/demo.sh stop

# The Python sandbox image wmrl-python:<hash>, built here with debootstrap
# from Debian's packages (never pulled): about 6 minutes and 100 MB of
# downloads the first time, a no-op once the tag exists.
pyimage:
	bash deploy/pyimage.sh

# The compose deployment (deploy/compose): images built here (nothing
# pulled), Temporal on Postgres persistence with its Web UI, Postgres,
# a control worker, two sandbox workers and a GPU-queue worker, each in
# its own container. `make up` then `deploy/compose/up.sh demo` runs the
# demo preset on it; `make down` keeps the volumes.
images:
	bash deploy/images.sh

up:
	bash deploy/compose/up.sh up

down:
	bash deploy/compose/up.sh down

# The chaos suite across containers (deploy/compose/chaos.sh): the demo
# preset once without faults, then once per fault (containers killed, cut
# off the network, restarted, Postgres stopped for 30 s); prints a table of
# hashes, rows and time lost. Not part of make test.
chaos:
	bash deploy/compose/chaos.sh

# fuzz runs each fuzz target (package:target) for FUZZTIME. It is not part
# of test. The default is a count of executions, not a duration: with a
# duration, Go 1.26's fuzz coordinator can report a spurious "context
# deadline exceeded" failure when the deadline fires while a starved worker
# is mid-call (golang/go#75804, fixed in Go 1.27); a count has no deadline
# to race. 50000x takes a few seconds per target here.
FUZZTIME ?= 50000x
FUZZ_TARGETS := ./internal/pairscsv:FuzzReadPairs ./internal/pairscsv:FuzzReadScores \
	./internal/runconfig:FuzzParse ./internal/program:FuzzParse ./internal/tokenizer:FuzzRoundTrip

.PHONY: fuzz
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $${t%%:*} $${t##*:} for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t##*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done
