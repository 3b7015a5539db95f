# Fenec's tasks. `make test` is what CI runs (.ci/run, with FENEC_STRICT=1):
# scripts/test.sh runs each part whose toolchain is here (Go; python3 with
# venv; node 20 with npm; a JDK with Maven; chromium, installed when
# missing; tree-sitter's grammars in a venv, for test-generated-parse) and
# skips the others, saying why. It fetches every module and
# package it uses. `make fuzz-api` also needs curl.
SHELL := bash
GO ?= go
NPM ?= npm
FUZZ_SECONDS ?= 180
SCHEMATHESIS_VERSION ?= 4.32.5

# The server the SDK, console and Kotlin suites start: FENEC_BIN (a
# prebuilt one, such as dist/fenec: no Go needed), else bin/fenec, built.
FENEC_BIN ?=
SERVER_BIN = $(if $(FENEC_BIN),$(abspath $(FENEC_BIN)),$(CURDIR)/bin/fenec)
SERVER_DEP = $(if $(FENEC_BIN),has-fenec-bin,build)
.PHONY: has-fenec-bin
has-fenec-bin:
	@test -x $(SERVER_BIN) || { echo "$(NO_BINARY) ($(SERVER_BIN) is not an executable)" >&2; exit 1; }

.PHONY: cluster-check test-generated-parse test-tools mutants check-tracked run build test test-js generate-sdks test-venv test-python test-go-sdk generate check-generated fuzz-api bench wait-bench queue-bench queue-bench-quick redis-bench changes-bench memory-bench memory-bench-10m

NO_BINARY = no fenec binary: set FENEC_BIN=/path/to/fenec, or install Go and run make build (make dist writes dist/fenec)
build:
	@command -v $(GO) >/dev/null || { echo "$(NO_BINARY)" >&2; exit 1; }
	cd server && $(GO) build -o ../bin/fenec ./cmd/fenec

# Release binaries that run without Go on the machine: dist/fenec and
# dist/sdkgen, static (no cgo: SQLite is modernc.org/sqlite, in Go),
# -trimpath, stripped, each stamped with VERSION and COMMIT (`fenec
# version`, `sdkgen -version`). VERSION is `git describe --tags --always
# --dirty`; outside a git checkout, a VERSION file's line, else "dev".
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || cat VERSION 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
DIST_LDFLAGS = -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)
.PHONY: dist
dist:
	cd server && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o ../dist/fenec ./cmd/fenec
	cd tools/sdkgen && CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(DIST_LDFLAGS)' -o ../../dist/sdkgen .

run: $(SERVER_DEP)
	$(SERVER_BIN) serve --file fenec.db --http 127.0.0.1:8080

# Everything generated: the server skeleton and every SDK's transport (from
# openapi.yaml), and the conformance cases (from docs/).
generate:
	cd server && $(GO) tool oapi-codegen -config httpapi/gen/config.yaml ../openapi.yaml
	cd conformance && $(GO) run ./cmd/extract -docs ../docs -out cases
	$(MAKE) generate-sdks
	$(MAKE) generate-console

# Fails when a generated file is not what `make generate` makes now: one
# check per generator, each run when its toolchain is here (scripts/test.sh;
# SDKGEN_BIN=dist/sdkgen checks the SDK transports without Go).
check-generated:
	scripts/test.sh generated

# Every part whose toolchain is here, each skipped (saying why) when it is
# not; a table at the end (scripts/test.sh, README.md "Testing").
# FENEC_BIN=dist/fenec runs the server suites without Go; FENEC_STRICT=1
# (CI) refuses skips a machine could have avoided.
test:
	scripts/test.sh

# The adversarial suite's loads against a real fenec serve (200 keep-alive
# writers for 20 s; 3 000 slowloris connections while /_health is timed):
# docs/reliability.md, "Adversarial clients". Its probes run in `make test`.
.PHONY: test-adversarial
test-adversarial:
	cd server && FENEC_ADVERSARIAL=1 $(GO) test -count=1 -v -timeout 10m -run 'TestAdversarial' ./cmd/fenec/

# strace: server/store's TestSyncBeforeAck watches the fsyncs under it; ip
# (iproute2): the cluster's partition test makes network namespaces;
# openssl: the JS, Python and Kotlin SDKs' TLS tests make their certificates
# with it; curl: the docs' curl lines (docs/redis.md) are run as they are
# written (Debian's packages; installed when missing, which needs root).
test-tools:
	@command -v strace >/dev/null && command -v ip >/dev/null && command -v openssl >/dev/null && command -v curl >/dev/null || { apt-get -o DPkg::Lock::Timeout=600 update -qq && \
		apt-get -o DPkg::Lock::Timeout=600 install -y -qq strace iproute2 openssl curl; }

# The failure-path mutations of docs/reliability.md, each applied to a
# temporary copy of the repository: caught or survived. Slow; not in test.
mutants:
	scripts/mutants.sh

# No built output in git: tracked files over 2 MB (outside an allow-list)
# and compiled executables fail the run.
check-tracked:
	scripts/check-tracked-size.sh

# .venv-test holds PyJWT, the second JWT library server/auth's interop test
# mints tokens with; the test skips, saying so, only when it is missing.
test-venv: .venv-test/.installed
.venv-test/.installed: server/auth/testdata/requirements.txt
	python3 -m venv .venv-test
	.venv-test/bin/pip install -q -r server/auth/testdata/requirements.txt
	touch $@

# The Python SDK: a venv under it (gitignored) with the package and its test
# dependencies, mypy --strict, then pytest against bin/fenec.
# The Python SDK's suite under other interpreters — its oldest and newest
# supported Pythons: PYTHONS="/path/to/python3.9 /path/to/python3.13" —
# each in a venv of its own (sdks/python/.venv-<version>); PYTEST_ARGS goes
# to pytest (scripts/test.sh's python-versions part leaves out the slowest).
PYTHONS ?=
PYTEST_ARGS ?=
.PHONY: test-python-versions
test-python-versions: $(SERVER_DEP)
	@test -n "$(PYTHONS)" || { echo "set PYTHONS to the interpreters to run the Python SDK's tests with" >&2; exit 1; }
	@for py in $(PYTHONS); do \
	  v=$$($$py -c 'import sys; print("%d.%d" % sys.version_info[:2])') || exit 1; \
	  echo "== Python $$v ($$py)"; \
	  test sdks/python/.venv-$$v/.installed -nt sdks/python/pyproject.toml || { $$py -m venv sdks/python/.venv-$$v && \
	    sdks/python/.venv-$$v/bin/pip install -q -e 'sdks/python[test]' && touch sdks/python/.venv-$$v/.installed; } || exit 1; \
	  (cd sdks/python && FENEC_BIN=$(SERVER_BIN) .venv-$$v/bin/pytest -q -p no:cacheprovider $(PYTEST_ARGS)) || exit 1; \
	done

test-python: $(SERVER_DEP) sdks/python/.venv/.installed
	cd sdks/python && .venv/bin/mypy --strict && FENEC_BIN=$(SERVER_BIN) .venv/bin/pytest -q
sdks/python/.venv/.installed: sdks/python/pyproject.toml
	python3 -m venv sdks/python/.venv
	sdks/python/.venv/bin/pip install -q -e 'sdks/python[test]'
	touch $@

# The Go SDK: vet, then its tests under -race against bin/fenec.
test-go-sdk: $(SERVER_DEP)
	cd sdks/go && $(GO) vet ./... && FENEC_BIN=$(SERVER_BIN) $(GO) test -race ./...

# The C#, Swift and Dart transports (tools/sdkgen's output; no compiler for
# them here): tree-sitter's grammars, pinned in a venv under
# tools/sdkgen/parsecheck (gitignored), parse each file (an ERROR or MISSING
# node fails, and so does a name the language reserves) and pytest checks
# its models, routes, calls, header names and error codes against
# openapi.yaml over the parse tree.
PARSECHECK := tools/sdkgen/parsecheck
test-generated-parse: $(PARSECHECK)/.venv/.installed
	cd $(PARSECHECK) && .venv/bin/pytest -q -p no:cacheprovider
$(PARSECHECK)/.venv/.installed: $(PARSECHECK)/requirements.txt
	python3 -m venv $(PARSECHECK)/.venv
	$(PARSECHECK)/.venv/bin/pip install -q -r $(PARSECHECK)/requirements.txt
	touch $@

# The JS/TS SDK: npm ci (again when package-lock.json changes), tsc (strict),
# then node --test against bin/fenec.
test-js: $(SERVER_DEP) sdks/js/node_modules/.package-lock.json
	cd sdks/js && $(NPM) run --silent build && FENEC_BIN=$(SERVER_BIN) $(NPM) test --silent

# The Kotlin SDK: Maven (kotlin-maven-plugin; everything from Maven Central
# into ~/.m2), its JUnit tests against bin/fenec, then `install` and a
# user's project outside the repository built on it. Needs a JDK 17+ and mvn.
.PHONY: test-kotlin
MVN ?= mvn
test-kotlin: $(SERVER_DEP)
	cd sdks/kotlin && FENEC_BIN=$(SERVER_BIN) $(MVN) -B -q install
	sdks/kotlin/scripts/user-project.sh $(SERVER_BIN) "$(MVN)"

sdks/js/node_modules/.package-lock.json: sdks/js/package.json sdks/js/package-lock.json
	cd sdks/js && $(NPM) ci --no-audit --no-fund
	touch $@

# Every SDK's generated transport (tools/sdkgen, from openapi.yaml), the
# builder golden file (conformance/builder-golden.json, by the JS builder)
# and the Kotlin SDK's public API dump (sdks/kotlin/api/fenecdb.api).
generate-sdks: sdks/js/node_modules/.package-lock.json
	cd tools/sdkgen && $(GO) run . -root ../..
	cd sdks/js && $(NPM) run --silent build && node dist/scripts/golden.js
	$(MAKE) sdks/python/.venv/.installed
	cd sdks/python && .venv/bin/python scripts/unasync_clients.py
	cd sdks/kotlin && FENEC_API_UPDATE=1 $(MVN) -B -q test -Dtest=ApiDumpTest

fuzz-api: $(SERVER_DEP)
	test -x .venv-fuzz/bin/st || (python3 -m venv .venv-fuzz && \
		.venv-fuzz/bin/pip install -q schemathesis==$(SCHEMATHESIS_VERSION))
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz-api.sh $(SERVER_BIN) .venv-fuzz/bin/st

bench:
	cd server && $(GO) test -run '^$$' -bench . ./engine/... ./store/...

# Held claims against a real server: put → held worker against polling,
# delayed jobs' lateness, 1 000 idle held claims, the nearest of 10, 100 and
# 1 000 held couriers.
wait-bench: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -fenec $(SERVER_BIN) -only wake,delayed,idle,couriers

# Every figure of the queue page over a million jobs, with PostgreSQL and
# Redis beside Fenec in the same run (apt-get installs them when missing, so
# run it as root on a fresh machine): bench/results/queue.{md,json,png} and
# the table in docs/benchmarks.md. BENCH_NOTE goes into the header.
BENCH_NOTE ?=
queue-bench: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -fenec $(SERVER_BIN) -jobs 1000000 -duration 2s -rounds 3 \
		-out results -docs ../docs/benchmarks.md -note "$(BENCH_NOTE)"

# Each SDK's worker (bench/workers/: Go NewWorker, JS worker(), Python
# Worker and AsyncWorker, Kotlin Worker, each on its SDK from this checkout
# as its README says, built here) at concurrency 1, 10 and 50 beside a
# plain HTTP loop, on the default (durable) server, alternating, into
# bench/results/workers.md. Minutes long; not in test. WORKER_BENCH_FLAGS
# makes it smaller (-worker-jobs 2000 -rounds 1 -systems plain,go …).
WORKER_BENCH_FLAGS ?=
KOTLIN_VERSION = $(shell sed -n 's#^  <version>\(.*\)</version>#\1#p' sdks/kotlin/pom.xml | head -1)
KOTLIN_COMPILER = $(shell sed -n 's#.*<kotlin.version>\(.*\)</kotlin.version>.*#\1#p' sdks/kotlin/pom.xml)
.PHONY: worker-bench worker-bench-programs worker-bench-python
worker-bench: $(SERVER_DEP) worker-bench-programs
	cd bench && $(GO) run ./cmd/queuebench -mode workers -fenec $(SERVER_BIN) -out results \
		-command "make worker-bench$(if $(WORKER_BENCH_FLAGS), WORKER_BENCH_FLAGS='$(WORKER_BENCH_FLAGS)')" \
		-note "$(BENCH_NOTE)" $(WORKER_BENCH_FLAGS)
worker-bench-programs: sdks/js/node_modules/.package-lock.json worker-bench-python
	cd bench/workers/go && $(GO) build -o worker .
	cd sdks/js && $(NPM) run --silent build
	cd bench/workers/js && $(NPM) install --no-audit --no-fund --silent
	cd sdks/kotlin && $(MVN) -B -q install -DskipTests
	cd bench/workers/kotlin && $(MVN) -B -q package -Dfenecdb.version=$(KOTLIN_VERSION) -Dkotlin.version=$(KOTLIN_COMPILER) && \
		$(MVN) -B -q dependency:build-classpath -Dfenecdb.version=$(KOTLIN_VERSION) -Dkotlin.version=$(KOTLIN_COMPILER) -Dmdep.outputFile=target/cp.txt

# The Python worker programs' venv, with the SDK of this checkout.
worker-bench-python:
	test -x bench/workers/python/.venv/bin/python || python3 -m venv bench/workers/python/.venv
	bench/workers/python/.venv/bin/pip install -q ./sdks/python && bench/workers/python/.venv/bin/pip install -q --force-reinstall --no-deps ./sdks/python

# Where the Python worker's own CPU goes: the plain loop and both Python
# workers at concurrency 10 and 50 (one round, as worker-bench runs them),
# then bench/workers/python/layers.py — each Python worker run again alone
# and under py-spy, its CPU split by layer (HTTP library, JSON, client,
# worker, loop and threads) — into bench/results/workers-python.md.
# Not a test: it prints figures.
.PHONY: worker-profile
worker-profile: $(SERVER_DEP) worker-bench-python
	bench/workers/python/.venv/bin/pip install -q py-spy
	rm -rf bench/.worker-profile
	cd bench && $(GO) run ./cmd/queuebench -mode workers -fenec $(SERVER_BIN) -out .worker-profile \
		-command "make worker-profile" -worker-jobs 20000 -rounds 1 -worker-concurrency 10,50 -systems plain,python,python-async
	{ cat bench/.worker-profile/workers.md; echo; \
	  bench/workers/python/.venv/bin/python bench/workers/python/layers.py $(SERVER_BIN); } > bench/results/workers-python.md.new
	rm -rf bench/.worker-profile
	mv bench/results/workers-python.md.new bench/results/workers-python.md && cat bench/results/workers-python.md

# The recipes of docs/redis.md under load (a counter beside Redis's INCR, a
# lock raced for, a rate limit, a million @ttl documents lapsing at once),
# each checked for its property, into bench/results/redis.md. Not a test:
# minutes long. REDIS_BENCH_FLAGS makes it smaller (-ttl-rows 100000 …).
redis-bench: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -mode redis -fenec $(SERVER_BIN) -out results \
		-note "$(BENCH_NOTE)" $(REDIS_BENCH_FLAGS)

# docs/changes.md's figures: memory per idle live query, write → event
# p50/p99 with 1, 100, 1 000 live queries on one query and 1 000 on as many,
# server CPU per write per live query, and the change stream beside Redis
# Streams (XADD/XREADGROUP), in one run: bench/results/changes.md. Every
# loop bounded (-change-limit); CHANGES_BENCH_FLAGS changes the sizes.
changes-bench: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -mode changes -fenec $(SERVER_BIN) -out results \
		-note "$(BENCH_NOTE)" $(CHANGES_BENCH_FLAGS)

# memory-bench: memory per job — the Go heap's breakdown by structure, a
# server's RSS loading, after a restart and after a drain, and Redis's
# used_memory for the same jobs, in one run (JOBS, default 1 000 000):
# bench/results/memory.md. Not a test: it prints figures.
# memory-bench-10m: the server and Redis alone at 10 000 000 jobs (no
# breakdown), bounded to 30 minutes: bench/results/memory-10m.md.
JOBS ?= 1000000
memory-bench: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -mode memory -fenec $(SERVER_BIN) -jobs $(JOBS) -out results -note "$(BENCH_NOTE)" $(MEMORY_BENCH_FLAGS)
memory-bench-10m: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -mode memory -fenec $(SERVER_BIN) -jobs 10000000 -memory-breakdown=false \
		-memory-limit 30m -memory-out memory-10m.md -out results -note "$(BENCH_NOTE)"

# The same over 100 000 jobs, each cell one drive of 3 s, in a few minutes, into
# bench/results/quick (not kept in git).
queue-bench-quick: $(SERVER_DEP)
	cd bench && $(GO) run ./cmd/queuebench -fenec $(SERVER_BIN) -jobs 100000 -duration 3s -rounds 1 \
		-out results/quick -note "$(BENCH_NOTE)"

# The queue console (console/, README.md "The console"): its TypeScript,
# bundled by esbuild with the JS SDK into server/console/assets/console.js,
# which is committed so that `make build` needs no npm (check-generated
# keeps it fresh). Its tests drive Debian's chromium, installed when
# missing, with playwright-core against bin/fenec.
CHROMIUM ?= /usr/bin/chromium
.PHONY: generate-console test-console
generate-console: console/node_modules/.package-lock.json
	cd console && node build.mjs

test-console: $(SERVER_DEP) console/node_modules/.package-lock.json
	@test -x $(CHROMIUM) || (apt-get -o DPkg::Lock::Timeout=600 update && \
		apt-get -o DPkg::Lock::Timeout=600 install -y chromium)
	cd console && $(NPM) run --silent typecheck && \
		CHROMIUM=$(CHROMIUM) FENEC_BIN=$(SERVER_BIN) $(NPM) test --silent

console/node_modules/.package-lock.json: console/package.json console/package-lock.json
	cd console && $(NPM) ci --no-audit --no-fund
	touch $@

# The cluster's histories (docs/cluster.md, Tests): make test keeps the
# short ones its cluster tests record (a directory, one file a test, new
# on every run: scripts/test.sh says why) and checks them with cmd/histcheck; cluster-check runs ten SIGKILLs of the
# leader under 16 clients, then ten faults alternating SIGKILLs and
# partitions in network namespaces (root), checks both histories, has a
# replica catch up after 100 000 writes from a snapshot, and measures the cluster's jobs/s and wake latency beside a lone server's.
cluster-check:
	cd server && FENEC_CLUSTER_KILLS=10 FENEC_HISTORY=$${TMPDIR:-/tmp}/fenec-cluster-long $(GO) test ./cmd/fenec -run '^TestClusterFailover$$' -count=1 -v -timeout 20m
	cd server && FENEC_CLUSTER_FAULTS=10 FENEC_HISTORY=$${TMPDIR:-/tmp}/fenec-cluster-long $(GO) test ./cmd/fenec -run '^TestClusterFaults$$' -count=1 -v -timeout 20m
	cd server && $(GO) run ./cmd/histcheck $${TMPDIR:-/tmp}/fenec-cluster-long
	cd server && FENEC_CLUSTER_WRITES=100000 $(GO) test ./cmd/fenec -run '^TestClusterReplicaFromSnapshot$$' -count=1 -v -timeout 20m
	cd server && FENEC_CLUSTER_BENCH=1 $(GO) test ./cmd/fenec -run '^TestClusterThroughput$$' -count=1 -v -timeout 10m
