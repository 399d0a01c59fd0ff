# Fila monorepo. Every target runs from the repository root; go.work ties the modules together.

# bash: make test reads its steps' exit status through a pipe (PIPESTATUS)
SHELL := /bin/bash

GO        ?= go
MODULES   := ./... ./generated/... ./lua/... ./server/... ./client/... ./tools/... ./tools/compare/... ./fuzz/... ./examples/...
DARWIN_MODULES := ./... ./generated/... ./lua/... ./server/... ./client/... ./fuzz/... ./examples/...
RACE_PKGS := ./lua/... ./server/... ./client/...
FUZZTIME  ?= 60s
# the targets that drive a live server (each input a connection or more): FUZZTIME_LIVE each
FUZZ_LIVE_PKGS := ./fuzz
FUZZTIME_LIVE  ?= $(FUZZTIME)
FUZZ_PKGS := ./generated/fibp ./generated/riftproto ./generated/store ./generated/riftstore ./generated/queuelog ./generated/cluster ./generated/wire \
             ./fuzz ./server/queuegroup ./server/meta ./server/throttle ./server/auth ./server/rift/subject \
             ./server/config ./client/cmd/fila ./lua/hooks ./lua/sandbox

.PHONY: all generate check-generated fmt vet test test-race race-if-cgo fuzz fuzz-short bench run build clean cluster rolling-restart

all: check-generated vet test

## generate: regenerate every codec from spec/*.yaml
generate:
	$(GO) generate ./...

## check-generated: fail when generated code does not match the specs (the go:generate lines in
## gen/generate.go, run with FILAGEN_CHECK=1: one list of specs for both)
check-generated:
	FILAGEN_CHECK=1 $(GO) generate ./gen/

fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## vet: every module; and, for darwin, every module but tools (the power-failure tools are FUSE
## and Linux only): the server is built and tested on Linux, but must still build elsewhere
vet:
	$(GO) vet $(MODULES)
	GOOS=darwin $(GO) vet $(DARWIN_MODULES)

## test: every module's tests, then RACE_PKGS under the race detector (race-if-cgo). Both steps run
## even when the first fails, and the packages that failed in either are listed at the end.
##
## Build configurations are what a cold run pays for (on 2 cores, each is minutes of compiling
## pebble, raft and quic-go): the first step builds as the image does (CGO_ENABLED=0 -trimpath,
## deploy/Dockerfile), and so does every test that builds a binary to run (fila-server, fila, the
## examples), so one compile of the dependency graph serves them all; the race step is the one
## other configuration. TEST_TIMEOUT is per test binary and covers the builds such a test runs
## inside it: deploy's builds the image's binaries while the rest of the suite compiles beside it,
## which from empty caches went past go test's default 10 minutes.
TEST_PKGS    := ./... ./generated/... ./tools/... ./tools/compare/... ./fuzz/... ./examples/...
TEST_TIMEOUT ?= 30m
test:
	@log=$$(mktemp); status=0; \
	echo "CGO_ENABLED=0 GOFLAGS=-trimpath $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_PKGS)"; \
	CGO_ENABLED=0 GOFLAGS="$$GOFLAGS -trimpath" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(TEST_PKGS) 2>&1 | tee $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || status=1; \
	$(MAKE) --no-print-directory race-if-cgo 2>&1 | tee -a $$log; \
	[ $${PIPESTATUS[0]} = 0 ] || status=1; \
	failed=$$(grep -E '^(FAIL|---? FAIL)' $$log | sort -u); rm -f $$log; \
	if [ $$status != 0 ]; then echo; echo "make test: FAILED"; echo "$${failed:-(no FAIL line: see the output above)}"; exit 1; fi; \
	echo; echo "make test: every package passed"

## race-if-cgo: RACE_PKGS under the race detector, or, saying why it cannot run here, without it
## (then in the first step's configuration, whose build it shares)
race-if-cgo:
	@cc=$$($(GO) env CC | cut -d' ' -f1); cgo=$$($(GO) env CGO_ENABLED); \
	if [ "$$cgo" != 1 ]; then why="CGO_ENABLED=$$cgo"; \
	elif ! command -v "$$cc" >/dev/null 2>&1; then why="no C compiler (CC=$$cc not found)"; fi; \
	if [ -z "$$why" ]; then \
	  echo "$(GO) test -count=1 -timeout $(TEST_TIMEOUT) -race $(RACE_PKGS)"; $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -race $(RACE_PKGS); \
	else \
	  echo "race detector skipped: it needs cgo and a C compiler, and here $$why; running $(RACE_PKGS) without it"; \
	  CGO_ENABLED=0 GOFLAGS="$$GOFLAGS -trimpath" $(GO) test -count=1 -timeout $(TEST_TIMEOUT) $(RACE_PKGS); \
	fi

## fuzz: run every fuzz target for FUZZTIME each (make fuzz FUZZTIME=10m). A failing input is
## saved under testdata/fuzz/ and printed; a run that fails without one (the fuzzing engine itself
## timing out on a loaded machine) is retried once.
fuzz:
	@log=$$(mktemp); for pkg in $(FUZZ_PKGS); do \
	  ft=$(FUZZTIME); case " $(FUZZ_LIVE_PKGS) " in *" $$pkg "*) ft=$(FUZZTIME_LIVE);; esac; \
	  targets=$$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); \
	  if [ -z "$$targets" ]; then echo "fuzz: no fuzz target listed in $$pkg (see above)"; rm -f $$log; exit 1; fi; \
	  for target in $$targets; do \
	    echo "fuzz $$pkg $$target ($$ft)"; \
	    for try in 1 2; do \
	      if $(GO) test $$pkg -run '^$$' -fuzz "^$$target$$" -fuzztime $$ft >$$log 2>&1; then break; fi; \
	      if grep -q 'Failing input written' $$log || [ $$try = 2 ]; then cat $$log; rm -f $$log; exit 1; fi; \
	      echo "  the fuzzing engine failed without a failing input; retrying:"; tail -5 $$log; \
	    done; \
	  done; \
	done; rm -f $$log

## fuzz-short: every fuzz target briefly (CI): 500 inputs each (100 for the live-server targets,
## whose inputs cost a connection and its answers' wait each), a count rather than a time so that
## a loaded machine cannot make the fuzzing engine miss its own deadline
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=500x FUZZTIME_LIVE=100x

## bench: codec, engine and broker benchmarks
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./generated/fibp
	@if [ -d server/engine ]; then $(GO) test -run '^$$' -bench . -benchmem ./server/engine; fi
	$(GO) test -run '^$$' -bench . -benchmem ./lua/hooks
	$(GO) test -run '^$$' -bench . -benchtime 2s ./server/rift/listener
	@if [ -d tools/bench ]; then $(GO) run ./tools/bench; fi

build:
	mkdir -p bin
	$(GO) build -o bin/ ./server/cmd/... ./client/cmd/...

## run: the broker with its embedded defaults (127.0.0.1:5555, data in ./data). The binary is built
## first and then replaces the shell (exec), so Ctrl-C reaches the server itself and stops it.
run:
	mkdir -p bin
	$(GO) build -o bin/fila-server ./server/cmd/fila-server
	exec bin/fila-server

## cluster: three nodes founding a cluster on loopback (FIBP 127.0.0.1:5561-5563, data and logs
## under ./data/cluster/); Ctrl-C stops all three
cluster:
	mkdir -p bin
	$(GO) build -o bin/fila-server ./server/cmd/fila-server
	exec bash deploy/cluster.sh

## rolling-restart: with make cluster running (another terminal), drain, restart and undrain its
## nodes one at a time (deploy/rolling-restart.sh; docs/cluster.md, "Rolling restart")
rolling-restart:
	mkdir -p bin
	$(GO) build -o bin/fila-server ./server/cmd/fila-server
	$(GO) build -o bin/fila ./client/cmd/fila
	bash deploy/rolling-restart.sh

clean:
	rm -rf bin data

.PHONY: bench-compare bench-compare-quick

## bench-compare: fila vs NATS (JetStream, NATS core over TLS) side by side on loopback; prints
## COMPARE lines, writes a table and a chart to ./results/compare-<timestamp> (COMPARE_FLAGS=-help)
bench-compare:
	$(GO) run ./tools/compare $(COMPARE_FLAGS)

## bench-compare-quick: the same for a few seconds per workload (CI proves the tool works; no thresholds)
bench-compare-quick:
	$(GO) run ./tools/compare -quick $(COMPARE_FLAGS)

.PHONY: chaos

## chaos: the history checker's long run (tools/chaos): fila-server on loopback under enqueue,
## consume and ack load through the Go SDK while a nemesis kills -9 and restarts it, then the
## history checked; prints operations, faults, lost, duplicated, unavailability windows
## (CHAOS_FLAGS=-help; e.g. CHAOS_FLAGS="-duration 10m -faults kill,pause")
chaos:
	$(GO) run ./tools/chaos/cmd/chaos $(CHAOS_FLAGS)

.PHONY: release release-snapshot

## release: make release VERSION=vX.Y.Z (docs/releasing.md): on the current branch, with a clean
## tree, commits the go.mod files as published and tags every module at VERSION, then the replace
## lines back; into dist/: fila and fila-server for linux and darwin on amd64 and arm64 (one
## tar.gz each), checksums.txt, the modules as a file-based proxy; the image where docker answers.
## It pushes nothing: it prints the git push command.
release:
	@if [ -z "$(VERSION)" ]; then echo "make release needs VERSION=vX.Y.Z (docs/releasing.md)" >&2; exit 2; fi
	$(GO) run ./tools/release -version $(VERSION) $(RELEASE_FLAGS)

## release-snapshot: the same into dist/, committing and tagging nothing (VERSION optional; the
## default is v0.0.0-snapshot-<commit>); RELEASE_FLAGS=-help lists the tool's flags
release-snapshot:
	$(GO) run ./tools/release -snapshot $(if $(VERSION),-version $(VERSION)) $(RELEASE_FLAGS)
