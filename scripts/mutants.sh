#!/usr/bin/env bash
# make mutants: apply each failure-path mutation of docs/reliability.md to a
# temporary copy of the repository, run the packages that should catch it,
# and report caught or survived. A mutation whose text is no longer in the
# file is reported "stale" (the code moved: update its line here).
#
#   scripts/mutants.sh            every mutation
#   scripts/mutants.sh 3 5        only mutations 3 and 5
#
# Exit status 1 when a mutation survived or is stale.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

# Each mutation: name @@ file (under server/) @@ text @@ replacement @@
# packages.
# The text must occur exactly once in the file.
mutations=(
  "engine: skip the 'store failed, refuse writes' check@@engine/db.go@@	if broken := db.broken; broken != nil {@@	if broken := db.broken; false \&\& broken != nil {@@./engine ./httpapi"
  "engine: ignore a failed commit (answer an unsaved write as success)@@engine/db.go@@	if err := wait(); err != nil {@@	if err := wait(); false \&\& err != nil {@@./engine ./httpapi"
  "store: flush interval x100 under --sync <ms>@@store/committer.go@@t := time.NewTicker(s.mode.Interval)@@t := time.NewTicker(s.mode.Interval * 100)@@./store"
  "httpapi: drop the key-expiry check@@httpapi/idempotency.go@@if !ok || (m.Expires != 0 \&\& m.Expires <= s.db.Clock().NowMS()) {@@if !ok {@@./httpapi"
  "store: commit instead of roll back when a fold fails@@store/fold.go@@		tx.exec(\"ROLLBACK\")@@		tx.exec(\"COMMIT\")@@./store ./engine"
  "engine: combine a token's update rules with AND instead of OR@@engine/scope.go@@Op: fenecql.OpOr, L: or, R: f}@@Op: fenecql.OpAnd, L: or, R: f}@@./engine ./httpapi ./auth"
  "engine: keep in memory the units the store lost (no undo)@@engine/db.go@@		undoSteps(db, db.pending[i].undo)@@		_ = undoSteps@@./engine ./httpapi"
  "engine: never end a store failure (no recovery)@@engine/db.go@@		if err == nil {
			db.lock()
			db.st.Resume()@@		if false {
			db.lock()
			db.st.Resume()@@./engine ./httpapi"
  "store: no sync of the log under --sync always@@store/commit.go@@		err = fdatasync(batch[0].seg.f)@@		err = nil@@./store"
  "store: no structure check of the file on open@@store/sqlite.go@@		if err := quickCheck(ctx, conn); err != nil {@@		if err := error(nil); err != nil {@@./store"
  "store: nothing logged of a torn log tail@@store/logfile.go@@		log(\"the store's log ends in a record@@		_ = fmt.Sprint(\"the store's log ends in a record@@./store"
  "store: delete folded log segments without syncing SQLite's WAL first@@store/committer.go@@		err = fdatasync(s.wal)@@		err = nil@@./store"
  "store: delete log segments whose records are not all folded@@store/committer.go@@		for n+1 < len(s.segs) \&\& s.segs[n+1].first-1 <= through {@@		for n+1 < len(s.segs) \&\& through >= 0 {@@./store"
  "store: open a bad log record followed by intact ones as a torn tail@@store/logfile.go@@	if bad >= 0 \&\& afterSynced > base {@@	if false \&\& bad >= 0 \&\& afterSynced > base {@@./store"
  "httpapi: no cap on the Idempotency-Keys held@@httpapi/idempotency.go@@	if n < s.cfg.IdempotencyMaxKeys \&\& b < s.cfg.IdempotencyMaxBytes {@@	if n >= 0 || b >= 0 {@@./httpapi"
  "store: ignore synced: refuse a bad log record followed by any intact one@@store/logfile.go@@	if bad >= 0 \&\& afterSynced > base {@@	if bad >= 0 \&\& afterSynced >= 0 \&\& after > 0 {@@./store"
  "store: log records say nothing was synced (synced 0)@@store/commit.go@@appendRecord(s.buf[:0], g.seq, s.synced.Load(), g.changes)@@appendRecord(s.buf[:0], g.seq, 0, g.changes)@@./store"
  "httpapi: the connection server reads a head with Transfer-Encoding itself@@httpapi/internal/h1/head.go@@		case equalFold(name, \"transfer-encoding\"), equalFold(name, \"expect\")@@		case equalFold(name, \"expect\")@@./httpapi/internal/h1 ./httpapi"
  "httpapi: a held claim never watches its connection@@httpapi/query.go@@		conn.Watch()@@		_ = conn.Watch@@./httpapi ./cmd/fenec"
  "store: a sync takes only the group written early, not the units queued after it@@store/commit.go@@s.cur.units > 0 \&\& !s.writing \&\& !s.segFull:@@s.cur.units > 0 \&\& !s.writing \&\& !s.segFull \&\& false:@@./store"
  "store: zeros written ahead over the block the log's records end in@@store/logfile.go@@	from := max(seg.zeroed, (seg.size+zeroBlock-1)/zeroBlock*zeroBlock)@@	from := max(seg.zeroed, seg.size/zeroBlock*zeroBlock)@@./store"
  "store: a chunk's seal does not raise the bound of the ids the tables may hold@@store/fold.go@@		cf.latest.sealed = max(cf.latest.sealed, cf.nextID)@@		cf.latest.sealed = max(cf.latest.sealed, 0)@@./store"
  "httpapi: a retry under an Idempotency-Key replays a record whose write the cluster's log has not committed@@httpapi/idempotency.go@@	if rec.Seq > committed {@@	if false \&\& rec.Seq > committed {@@./cluster ./httpapi"
  "store: the fold's range delete steps over a gap of one id (deletes a document that stays)@@store/fold.go@@		for j < len(keys) \&\& keys[j].id == keys[j-1].id+1 {@@		for j < len(keys) \&\& keys[j].id <= keys[j-1].id+2 {@@./store"
  "cluster: an entry made by memory of another term is applied, not skipped@@cluster/node.go@@tagged \&\& term != l.Term {@@tagged \&\& false \&\& term != l.Term {@@./cluster"
  "httpapi: a request after an idle spell does not wake the sleeping sweeper (its watch never starts)@@httpapi/internal/h1/conn.go@@	c.s.wakeSweep()@@	_ = c.s.wakeSweep@@./httpapi/internal/h1"
  "engine: evict a row whose latest write is not folded yet@@engine/evict.go@@				if s > folded {@@				if false \&\& s > folded {@@./engine"
  "engine: a read back that failed passes for a row not there@@engine/evict.go@@	if db.ev == nil || db.ev.failedUnder.Load() == before {@@	if true || db.ev == nil {@@./engine ./httpapi"
  "engine: a fold forgets a row written again after it@@engine/evict.go@@		if s, ok := e.dirty[w.id]; ok \&\& s == w.seq {@@		if _, ok := e.dirty[w.id]; ok {@@./engine"
  "engine: a numSet leaf re-packed with one bit too few for its ids@@engine/numset.go@@	return li + (64-ln-li)/2, true@@	return max(li, 1) - 1 + (64-ln-li)/2, true@@./engine"
  "engine: an id map page drops its slots with a resident row in it@@engine/docmap.go@@		if d != evictedDoc {@@		if d != evictedDoc \&\& false {@@./engine"
)

only=("$@")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The copy: tracked and untracked-but-not-ignored files of the working tree.
(cd "$root" && git ls-files -z --cached --others --exclude-standard -- server conformance openapi.yaml docs |
  xargs -0 cp --parents -t "$tmp" 2>/dev/null || true)
cp -a "$tmp" "$tmp.clean"
trap 'rm -rf "$tmp" "$tmp.clean"' EXIT

bad=0
printf '%-3s %-66s %s\n' "#" "mutation" "result"
for i in "${!mutations[@]}"; do
  n=$((i + 1))
  if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " == *" $n "* ]]; then continue; fi
  rec=${mutations[$i]}
  name=${rec%%@@*} && rec=${rec#*@@}
  file=${rec%%@@*} && rec=${rec#*@@}
  text=${rec%%@@*} && rec=${rec#*@@}
  repl=${rec%%@@*} && pkgs=${rec#*@@}
  rm -rf "$tmp" && cp -a "$tmp.clean" "$tmp"
  if ! python3 - "$tmp/server/$file" "$text" "$repl" <<'PY'
import sys
path, text, repl = sys.argv[1], sys.argv[2], sys.argv[3].replace('\\&', '&')
text = text.replace('\\&', '&')
s = open(path).read()
if s.count(text) != 1:
    sys.exit(1)
open(path, 'w').write(s.replace(text, repl))
PY
  then
    printf '%-3s %-66s %s\n' "$n" "$name" "stale (text not found once in server/$file)"
    bad=1
    continue
  fi
  if ! (cd "$tmp/server" && go vet $pkgs >"$tmp.log" 2>&1); then
    printf '%-3s %-66s %s\n' "$n" "$name" "broken (does not build: $(grep -m1 -v '^#' "$tmp.log"))"
    bad=1
    continue
  fi
  # A mutant may hang a test rather than fail it: bounded, a timeout is a
  # failure too.
  if (cd "$tmp/server" && go test -count=1 -timeout 5m $pkgs >"$tmp.log" 2>&1); then
    printf '%-3s %-66s %s\n' "$n" "$name" "SURVIVED ($pkgs)"
    bad=1
  else
    # No "--- FAIL" line (a test binary that did not build, or timed out):
    # grep finds none, which must not end the script (set -e, pipefail).
    caught=$(grep -m3 -E '^\s*--- FAIL: ' "$tmp.log" | sed -E 's/^\s*--- FAIL: ([^ ]+).*/\1/' | paste -sd, - || true)
    if [ -z "$caught" ] && grep -q 'panic: test timed out' "$tmp.log"; then
      caught="a test timing out (a hang)"
    fi
    printf '%-3s %-66s %s\n' "$n" "$name" "caught by ${caught:-a failing build of the tests}"
  fi
done
rm -f "$tmp.log"
exit $bad
