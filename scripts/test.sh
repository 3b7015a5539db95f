#!/usr/bin/env bash
# make test: every part of the repository's tests, each run when its
# toolchain is on this machine and skipped, saying why, when it is not.
# It keeps going after a failed part, prints a table, ends with the line
# "N passed, N failed, N skipped" and exits 1 if any part failed.
#
#   scripts/test.sh             # every part
#   scripts/test.sh js python   # some parts, by id (scripts/test.sh -list)
#
# The rules (README.md, Testing):
#   - a part whose toolchain is missing is skipped; one whose toolchain is
#     here but fails is a failure, never a skip;
#   - FENEC_STRICT=1 (CI, .ci/run) refuses to skip a part whose main tool
#     is here but something it needs is missing (node without npm, python3
#     without venv, go without a C compiler for -race): that is a failure.
#     A part with no code yet (no sdks/dotnet) is skipped either way;
#   - the suites that start a server take FENEC_BIN; without it, bin/fenec
#     is built when Go is here (make build), else they fail saying so;
#   - SDKGEN_BIN (such as dist/sdkgen) checks the SDK transports without Go.
#
# Bash and POSIX awk only: it runs on machines without Go or Python.
# The whole script is one block, read before it runs: editing the file
# during a run (a long one) does not change the run.
{
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
MAKE=${MAKE:-make}
GO=${GO:-go}
NPM=${NPM:-npm}
MVN=${MVN:-mvn}
STRICT=${FENEC_STRICT:-0}
LOGS=$(mktemp -d) # in $TMPDIR, else /tmp

have() { command -v "$1" >/dev/null 2>&1; }

# A part's function runs in a subshell with its output in its log. It calls
# absent "why" (its toolchain is not here: skipped), lacking "why" (its main
# tool is here, something it needs is not: skipped, or failed under
# FENEC_STRICT=1), or notyet "why" (nothing to test yet: skipped), or runs.
absent() { echo "$1" >"$PART_REASON"; exit 77; }
notyet() { echo "$1" >"$PART_REASON"; exit 77; }
lacking() {
  if [[ $STRICT == 1 ]]; then
    echo "FENEC_STRICT=1 refuses to skip: $1" | tee "$PART_REASON"
    exit 1
  fi
  echo "$1" >"$PART_REASON"
  exit 77
}
# counted P F adds counts a runner's output does not carry (a check, a
# script, Maven's surefire reports).
counted() { printf '\ncounted: %s passed, %s failed\n' "$1" "$2"; }

# gotest DIR ARGS...: go test -json in DIR, shown as plain go test would.
# The server's own suites test the source: FENEC_BIN (which they would
# also take) is unset for them; the Go SDK's is given it explicitly.
gotest() {
  local dir=$1
  shift
  (cd "$dir" && env -u FENEC_BIN $GO test -json "$@") | awk -f "$ROOT/scripts/test/gojson.awk"
}

# The fenec binary the server suites start: FENEC_BIN, else bin/fenec
# built here when Go is. needbin fails the part, in one line, without one.
NOBIN="no fenec binary: set FENEC_BIN=/path/to/fenec (make dist on a machine with Go writes dist/fenec), or install Go"
if [[ -n ${FENEC_BIN:-} ]]; then
  FENEC_BIN=$(cd "$(dirname "$FENEC_BIN")" 2>/dev/null && echo "$PWD/$(basename "$FENEC_BIN")")
fi
if [[ -n ${SDKGEN_BIN:-} ]]; then
  SDKGEN_BIN=$(cd "$(dirname "$SDKGEN_BIN")" 2>/dev/null && echo "$PWD/$(basename "$SDKGEN_BIN")")
  export SDKGEN_BIN
fi
# needopenssl: the JS, Python and Kotlin suites' TLS tests make their
# certificates with the openssl CLI (Debian's package; make test-tools
# installs it when missing, which needs root).
needopenssl() {
  have openssl || $MAKE --no-print-directory test-tools || exit 1
}
needbin() {
  # A part run alone (scripts/test.sh js) builds bin/fenec as the binary part does.
  if [[ -z ${FENEC_BIN:-} ]] && have "$GO"; then
    $MAKE --no-print-directory build || exit 1
    FENEC_BIN=$ROOT/bin/fenec
  fi
  if [[ -z ${FENEC_BIN:-} || ! -x $FENEC_BIN ]]; then
    echo "$NOBIN${FENEC_BIN:+ ($FENEC_BIN is not an executable)}" | tee "$PART_REASON"
    exit 1
  fi
  export FENEC_BIN
}
needgo() { have "$GO" || absent "go not installed"; }
needrace() {
  # -race needs cgo and so a C compiler.
  have "${CC:-gcc}" || have cc || lacking "go -race needs a C compiler (apt-get install gcc)"
}
neednode() {
  have node || absent "node not installed"
  have "$NPM" || lacking "node is here but npm is not"
}
needpython() {
  have python3 || absent "python3 not installed"
  python3 -c 'import venv, ensurepip' 2>/dev/null || lacking "python3 is here but its venv module is not (apt-get install python3-venv)"
}

# ---- the parts, in order -------------------------------------------------

PARTS=(tracked binary server-vet server histcheck race conformance bench sdkgen generated
  python python-versions js go-sdk kotlin console generated-parse dotnet swift dart)
declare -A TITLE=(
  [tracked]="no built output in git"
  [binary]="server binary (make build)"
  [server-vet]="Go server: vet"
  [server]="Go server: tests"
  [histcheck]="Go server: histcheck"
  [race]="Go server: -race"
  [conformance]="conformance"
  [bench]="bench"
  [sdkgen]="tools/sdkgen"
  [generated]="check-generated"
  [python]="Python SDK"
  [python-versions]="Python SDK: oldest and newest Python"
  [js]="JS SDK"
  [go-sdk]="Go SDK"
  [kotlin]="Kotlin SDK"
  [console]="console"
  [generated-parse]="generated SDKs (C#/Swift/Dart, parsed)"
  [dotnet]=".NET SDK"
  [swift]="Swift SDK"
  [dart]="Dart SDK"
)

part_tracked() {
  have git || absent "git not installed"
  git rev-parse --git-dir >/dev/null 2>&1 || absent "not a git checkout"
  scripts/check-tracked-size.sh && counted 1 0
}

part_binary() {
  if [[ -n ${FENEC_BIN:-} ]]; then
    needbin
    "$FENEC_BIN" version && counted 1 0
    return
  fi
  needgo
  $MAKE --no-print-directory build && counted 1 0
}

part_server-vet() {
  needgo
  (cd server && $GO vet ./...) && counted 1 0
}

# The cluster tests record histories into $FENEC_HISTORY, which histcheck
# then reads. The directory is new on every run: go test's cache keys a
# result on the values of the environment variables the test read, so a
# new FENEC_HISTORY can never be answered from the cache — the tests that
# write the history always run, and histcheck never reads a history that
# a cached run did not write (nor an old one).
HISTORY=$LOGS/cluster-history
part_server() {
  needgo
  have strace && have ip && have openssl || $MAKE --no-print-directory test-tools || exit 1
  # PyJWT for server/auth's interop test, which skips, saying so, without
  # python3; with python3 here, FENEC_STRICT=1 wants it run.
  if python3 -c 'import venv, ensurepip' 2>/dev/null; then
    $MAKE --no-print-directory test-venv || exit 1
  elif have python3 && [[ $STRICT == 1 ]]; then
    lacking "python3 is here without its venv module: server/auth's PyJWT interop test would skip"
  fi
  FENEC_HISTORY=$HISTORY gotest server ./...
}
part_histcheck() {
  needgo
  [[ -d $HISTORY ]] || { echo "no cluster history in $HISTORY: the Go server's tests did not run (their part must run first)"; exit 1; }
  (cd server && $GO run ./cmd/histcheck "$HISTORY") && counted 1 0
}
part_race() {
  needgo
  needrace
  gotest server -race ./engine/... ./store/... ./httpapi/... ./auth/... ./wait/... ./cluster/... ./changes/...
}
part_conformance() {
  needgo
  (cd conformance && $GO vet ./...) || exit 1
  gotest conformance ./...
}
part_bench() {
  needgo
  (cd bench && $GO vet ./...) || exit 1
  gotest bench ./...
}
part_sdkgen() {
  needgo
  (cd tools/sdkgen && $GO vet ./...) || exit 1
  gotest tools/sdkgen ./...
}

# check-generated: each generated file against what `make generate` makes
# now, one check per generator, each run when its toolchain is here.
part_generated() {
  local ok=0 bad=0 skipped=()
  check() { # check NAME COMMAND...
    local name=$1
    shift
    if "$@"; then echo "fresh: $name"; ok=$((ok + 1)); else echo "STALE or failed: $name"; bad=$((bad + 1)); fi
  }
  if have "$GO"; then
    check "server/httpapi/gen/api.gen.go (oapi-codegen)" gen_api
    check "conformance/cases (extract)" bash -c "cd conformance && $GO run ./cmd/extract -docs ../docs -out cases -check"
  else
    skipped+=("api.gen.go and conformance/cases (go not installed)")
  fi
  if [[ -n ${SDKGEN_BIN:-} ]]; then
    check "SDK transports ($SDKGEN_BIN)" "$SDKGEN_BIN" -root . -check
  elif have "$GO"; then
    check "SDK transports (tools/sdkgen)" bash -c "cd tools/sdkgen && $GO run . -root ../.. -check"
  else
    skipped+=("SDK transports (no go, no SDKGEN_BIN)")
  fi
  if have python3 && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    check "Python async → sync clients (unasync)" bash -c "$MAKE --no-print-directory sdks/python/.venv/.installed && cd sdks/python && .venv/bin/python scripts/unasync_clients.py --check"
  else
    skipped+=("Python sync clients (no python3 with venv)")
  fi
  if have node && have "$NPM"; then
    check "builder golden file (JS)" bash -c "$MAKE --no-print-directory sdks/js/node_modules/.package-lock.json && cd sdks/js && $NPM run --silent build && node dist/scripts/golden.js --check"
    check "server/console/assets/console.js (console bundle)" gen_console
  else
    skipped+=("builder golden file and console bundle (no node with npm)")
  fi
  if have java && have "$MVN"; then
    check "sdks/kotlin/api/fenecdb.api (Kotlin public API)" bash -c "cd sdks/kotlin && env -u FENEC_API_UPDATE $MVN -B -q test -Dtest=ApiDumpTest"
  else
    skipped+=("Kotlin public API dump (no JDK with Maven)")
  fi
  for s in "${skipped[@]}"; do echo "skipped: $s"; done
  counted "$ok" "$bad"
  ((bad == 0))
}
gen_api() {
  local tmp
  tmp=$(mktemp -d)
  sed "s#^output: .*#output: $tmp/api.gen.go#" server/httpapi/gen/config.yaml >"$tmp/config.yaml"
  (cd server && $GO tool oapi-codegen -config "$tmp/config.yaml" ../openapi.yaml) &&
    diff -u server/httpapi/gen/api.gen.go "$tmp/api.gen.go" >/dev/null
  local rc=$?
  rm -rf "$tmp"
  return $rc
}
gen_console() {
  local tmp rc
  tmp=$(mktemp -d)
  $MAKE --no-print-directory console/node_modules/.package-lock.json &&
    (cd console && node build.mjs "$tmp/console.js") &&
    cmp -s server/console/assets/console.js "$tmp/console.js"
  rc=$?
  rm -rf "$tmp"
  return $rc
}

part_python() {
  needpython
  needbin
  needopenssl
  $MAKE --no-print-directory test-python FENEC_BIN="$FENEC_BIN"
}
# python_at V: the python V interpreter, from pyenv or on PATH.
python_at() {
  local py
  if have pyenv; then
    for py in "$(pyenv root)"/versions/"$1".*/bin/python"$1"; do
      [[ -x $py ]] && { echo "$py"; return 0; }
    done
  fi
  command -v "python$1"
}
# The Python SDK's suite under the oldest and newest Pythons its
# pyproject.toml names (make test-python-versions), less the test that
# builds the wheel in a fresh venv: packaging is the python part's.
part_python-versions() {
  needpython
  local v py pys=() missing=()
  for v in $(sed -n 's/.*"Programming Language :: Python :: \(3\.[0-9]*\)".*/\1/p' sdks/python/pyproject.toml | sort -t. -k2 -n | sed -n '1p;$p'); do
    if py=$(python_at "$v"); then pys+=("$py"); else missing+=("$v"); fi
  done
  ((${#missing[@]} == 0)) || absent "no Python ${missing[*]} here (pyenv install ${missing[*]}, or ${missing[*]/#/python} on PATH)"
  needbin
  needopenssl
  $MAKE --no-print-directory test-python-versions PYTHONS="${pys[*]}" FENEC_BIN="$FENEC_BIN" \
    PYTEST_ARGS="--deselect tests/test_readme.py::test_wheel_in_a_fresh_venv"
}
part_js() {
  neednode
  needbin
  needopenssl
  $MAKE --no-print-directory test-js FENEC_BIN="$FENEC_BIN"
}
part_go-sdk() {
  needgo
  needrace
  needbin
  (cd sdks/go && $GO vet ./...) || exit 1
  (cd sdks/go && $GO test -json -race ./...) | awk -f "$ROOT/scripts/test/gojson.awk"
}
part_kotlin() {
  have java || absent "no JDK (java) installed"
  have "$MVN" || lacking "a JDK is here but Maven ($MVN) is not"
  needbin
  needopenssl
  rm -rf sdks/kotlin/target/surefire-reports
  local rc=0
  (cd sdks/kotlin && $MVN -B -q install) || rc=1
  # Surefire's reports: "Tests run: N, Failures: F, Errors: E, Skipped: S".
  cat sdks/kotlin/target/surefire-reports/*.txt 2>/dev/null | awk '
    /Tests run:/ { gsub(/,/, ""); for (i = 1; i <= NF; i++) { if ($i == "run:") r += $(i+1); if ($i == "Failures:") f += $(i+1); if ($i == "Errors:") e += $(i+1); if ($i == "Skipped:") s += $(i+1) } }
    END { printf "\ncounted: %d passed, %d failed\n", r - f - e - s, f + e }'
  ((rc == 0)) || exit 1
  if sdks/kotlin/scripts/user-project.sh "$FENEC_BIN" "$MVN"; then counted 1 0; else counted 0 1; exit 1; fi
}
part_console() {
  neednode
  needbin
  local chromium=${CHROMIUM:-/usr/bin/chromium}
  if [[ ! -x $chromium ]]; then
    # Debian's chromium, installed as make test-console does; a machine
    # that cannot install it fails here rather than skipping.
    have apt-get || lacking "no chromium at $chromium and no apt-get to install it"
  fi
  $MAKE --no-print-directory test-console FENEC_BIN="$FENEC_BIN" CHROMIUM="$chromium"
}
part_generated-parse() {
  grep -q '^test-generated-parse:' Makefile || notyet "no make test-generated-parse target yet"
  $MAKE --no-print-directory test-generated-parse
}
part_dotnet() {
  [[ -d sdks/dotnet ]] || notyet "no sdks/dotnet yet"
  have dotnet || absent "dotnet not installed"
  compgen -G 'sdks/dotnet/*.sln' >/dev/null || compgen -G 'sdks/dotnet/*/*.csproj' >/dev/null ||
    compgen -G 'sdks/dotnet/*.csproj' >/dev/null || notyet "no .NET project in sdks/dotnet yet"
  needbin
  (cd sdks/dotnet && dotnet test)
}
part_swift() {
  [[ -d sdks/swift ]] || notyet "no sdks/swift yet"
  have swift || absent "swift not installed"
  [[ -f sdks/swift/Package.swift ]] || notyet "no Package.swift in sdks/swift yet"
  needbin
  (cd sdks/swift && swift test)
}
part_dart() {
  if ! have dart || [[ ! -f sdks/dart/pubspec.yaml ]]; then
    notyet "no Dart toolchain on any machine: generated and parsed only"
  fi
  needbin
  (cd sdks/dart && dart test)
}

# ---- counting and the table ----------------------------------------------

# counts LOG prints "passed failed" from the runners' own summary lines:
# go test -json (gojson.awk's line), node --test (# pass / # fail, TAP),
# pytest's last line, dotnet test, swift test (XCTest), and counted lines.
counts() {
  awk '
    { gsub(/\033\[[0-9;]*[A-Za-z]/, "") } # Maven colours its lines
    /^go tests: [0-9]+ passed, [0-9]+ failed/ { p += $3; f += $5 }
    /^counted: [0-9]+ passed, [0-9]+ failed/ { p += $2; f += $4 }
    /^# pass [0-9]+$/ { p += $3 }
    /^# fail [0-9]+$/ { f += $3 }
    /^(=+ )?[0-9]+ (passed|failed)(, [0-9]+ [a-z]+)* in [0-9.]+s/ {
      for (i = 1; i < NF; i++) {
        n = $(i+1); sub(/,$/, "", n)
        if (n == "passed") p += $i
        if (n == "failed" || n == "error" || n == "errors") f += $i
      }
    }
    /(Passed|Failed)! +- +Failed: +[0-9]+, +Passed: +[0-9]+/ {
      line = $0; gsub(/[,:]/, " ", line); split(line, w, / +/)
      for (i = 1; i in w; i++) { if (w[i] == "Failed" && w[i+1] ~ /^[0-9]+$/) f += w[i+1]; if (w[i] == "Passed" && w[i+1] ~ /^[0-9]+$/) p += w[i+1] }
    }
    /Executed [0-9]+ tests?, with [0-9]+ failures?/ { sp = $2; sf = $5 }
    END { p += sp - sf; f += sf; printf "%d %d\n", p, f }
  ' "$1"
}

if [[ ${1:-} == -list ]]; then
  for id in "${PARTS[@]}"; do printf '%-16s %s\n' "$id" "${TITLE[$id]}"; done
  exit 0
fi
want=("$@")
((${#want[@]})) || want=("${PARTS[@]}")
for id in "${want[@]}"; do
  [[ -n ${TITLE[$id]:-} ]] || { echo "scripts/test.sh: no part $id (scripts/test.sh -list)" >&2; exit 2; }
done

rows=()
total_p=0 total_f=0 skipped=0 failed_parts=0
for id in "${want[@]}"; do
  log=$LOGS/$id.log
  PART_REASON=$LOGS/$id.reason
  export PART_REASON
  echo
  echo "==== ${TITLE[$id]} ($id)"
  start=$SECONDS
  ("part_$id") 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$((SECONDS - start))
  # After building bin/fenec, the later parts start it.
  if [[ $id == binary && $rc == 0 && -z ${FENEC_BIN:-} ]]; then FENEC_BIN=$ROOT/bin/fenec; fi
  read -r p f < <(counts "$log")
  if ((rc == 77)); then
    why=$(cat "$PART_REASON")
    echo "skipped: $why"
    rows+=("${TITLE[$id]}|skipped ($why)|-|${secs}s")
    skipped=$((skipped + 1))
    continue
  fi
  if ((rc == 0 && f > 0)); then rc=1; fi # a runner that counted a failure and exited 0
  if ((rc != 0 && f == 0)); then f=1; fi # failed without a test to name (a build, a vet, a missing binary)
  total_p=$((total_p + p)) total_f=$((total_f + f))
  if ((rc == 0)); then
    rows+=("${TITLE[$id]}|ran|$p/$f|${secs}s")
  else
    failed_parts=$((failed_parts + 1))
    if [[ -s $PART_REASON ]]; then
      rows+=("${TITLE[$id]}|FAILED: $(cat "$PART_REASON")|$p/$f|${secs}s")
    else
      rows+=("${TITLE[$id]}|FAILED (log: $log)|$p/$f|${secs}s")
    fi
  fi
done

echo
echo "Tests counted per runner (top-level Go tests, node/pytest/JUnit tests, one per check or script); skipped counts parts."
printf '%-40s  %-60s  %-14s  %s\n' "part" "ran / skipped (why)" "passed/failed" "time"
for r in "${rows[@]}"; do
  IFS='|' read -r name status pf t <<<"$r"
  printf '%-40s  %-60s  %-14s  %s\n' "$name" "$status" "$pf" "$t"
done
echo "$total_p passed, $total_f failed, $skipped skipped"
((failed_parts == 0))
exit
}
