#!/usr/bin/env bash
# make fuzz-api: schemathesis drives every operation of openapi.yaml against
# a real `fenec serve` for FUZZ_SECONDS, checking every answer against the
# spec (no 5xx, status, content type, headers and bodies as declared).
# Usage: scripts/fuzz-api.sh <fenec binary> <schemathesis st>
set -euo pipefail
bin=$1 st=$2
seconds=${FUZZ_SECONDS:-180}
token=fuzz-token
tmp=$(mktemp -d)
"$bin" serve --http 127.0.0.1:0 --file "$tmp/fuzz.db" --clock manual --token "$token" \
  >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$tmp"' EXIT
for _ in $(seq 100); do
  grep -q '^listening on ' "$tmp/out" && break
  sleep 0.1
done
addr=$(sed -n 's/^listening on //p' "$tmp/out")
[ -n "$addr" ] || { cat "$tmp/err"; echo "fenec serve did not start" >&2; exit 1; }
# A collection for the generated statements to find.
curl -fsS -X POST "http://$addr/query" -H "Authorization: Bearer $token" \
  -d '{"query": "create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)"}' >/dev/null
# Every check but positive_data_acceptance: a body that fits the schema
# still holds FenecQL, which may not parse or may be refused (an unknown
# collection, an unmet require), so 400/404/412/422 are right answers to
# schema-valid requests. Those answers are still checked against the spec.
# A claim held by Fenec-Wait is answered after up to 30 s by design, so the
# response-time limit sits just above it.
status=0
"$st" --config-file scripts/schemathesis.toml run openapi.yaml --url "http://$addr" -H "Authorization: Bearer $token" \
  --checks all --exclude-checks positive_data_acceptance --max-response-time 31 --max-time "$seconds" --request-timeout 40 --seed "${FUZZ_SEED:-1}" \
  --suppress-health-check all || status=$?
if grep -q 'level=ERROR' "$tmp/err"; then
  echo "the server logged errors:" >&2
  grep 'level=ERROR' "$tmp/err" | head -20 >&2
  status=1
fi
exit "$status"
