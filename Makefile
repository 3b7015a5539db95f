# Fenec's tasks. `make test` is what CI runs (.ci/run): it needs Go and
# python3 (a venv with PyJWT, for the JWT interop test) and fetches every
# module and package it uses. `make fuzz-api` also needs curl.
SHELL := bash
GO ?= go
FUZZ_SECONDS ?= 180
SCHEMATHESIS_VERSION ?= 4.32.5

.PHONY: run build test test-venv test-python generate check-generated fuzz-api bench wait-bench

build:
	cd server && $(GO) build -o ../bin/fenec ./cmd/fenec

run: build
	./bin/fenec serve --file fenec.db --http 127.0.0.1:8080

# Everything generated: the server skeleton (from openapi.yaml) and the
# conformance cases (from docs/).
generate:
	cd server && $(GO) tool oapi-codegen -config httpapi/gen/config.yaml ../openapi.yaml
	cd conformance && $(GO) run ./cmd/extract -docs ../docs -out cases

# Fails when a generated file is not what `make generate` makes now.
check-generated:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	sed "s#^output: .*#output: $$tmp/api.gen.go#" server/httpapi/gen/config.yaml >"$$tmp/config.yaml" && \
	(cd server && $(GO) tool oapi-codegen -config "$$tmp/config.yaml" ../openapi.yaml) && \
	if ! diff -u server/httpapi/gen/api.gen.go "$$tmp/api.gen.go" >/dev/null; then \
		echo "server/httpapi/gen/api.gen.go is stale: run make generate" >&2; exit 1; fi
	cd conformance && $(GO) run ./cmd/extract -docs ../docs -out cases -check

test: check-generated test-venv
	cd server && $(GO) vet ./... && $(GO) test ./...
	cd conformance && $(GO) vet ./... && $(GO) test ./...
	cd server && $(GO) test -race ./engine/... ./store/... ./httpapi/... ./auth/... ./wait/...
	$(MAKE) test-python

# .venv-test holds PyJWT, the second JWT library server/auth's interop test
# mints tokens with; the test skips, saying so, only when it is missing.
test-venv: .venv-test/.installed
.venv-test/.installed: server/auth/testdata/requirements.txt
	python3 -m venv .venv-test
	.venv-test/bin/pip install -q -r server/auth/testdata/requirements.txt
	touch $@

# The Python SDK: a venv under it (gitignored) with the package and its test
# dependencies, mypy --strict, then pytest against bin/fenec.
test-python: build sdks/python/.venv/.installed
	cd sdks/python && .venv/bin/mypy --strict && .venv/bin/pytest -q
sdks/python/.venv/.installed: sdks/python/pyproject.toml
	python3 -m venv sdks/python/.venv
	sdks/python/.venv/bin/pip install -q -e 'sdks/python[test]'
	touch $@

fuzz-api: build
	test -x .venv-fuzz/bin/st || (python3 -m venv .venv-fuzz && \
		.venv-fuzz/bin/pip install -q schemathesis==$(SCHEMATHESIS_VERSION))
	FUZZ_SECONDS=$(FUZZ_SECONDS) scripts/fuzz-api.sh bin/fenec .venv-fuzz/bin/st

bench:
	cd server && $(GO) test -run '^$$' -bench . ./engine/... ./store/...

# Held claims against a real server: put → held worker against polling,
# delayed jobs' lateness, 1 000 idle held claims, the nearest of 10, 100 and
# 1 000 held couriers.
wait-bench: build
	cd server && $(GO) run ./cmd/queuebench -fenec ../bin/fenec
