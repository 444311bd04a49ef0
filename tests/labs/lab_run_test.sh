#!/usr/bin/env bash
# End to end: the lab CLI's exit codes and one short lab through the whole proof protocol (LSL-D: dp 2,
# 6 steps, skip-grad-allreduce; about 40 s on 2 cores). The verdict, the title, the first-divergence
# view (the catalogue's expected detector for the fault) and the learner's next steps are checked; then every
# claim of LSL-D's observations against the bundle, each negated in a copy of the catalogue and the note as
# it once was (the fault run "silently diverges", exit 0) planted, each of which must fail
# (tests/support/lab_claims.py).
# Usage: lab_run_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"

"$BIN" lab list > "$WORK/list.txt" || fail "lab list exited $?"
[ "$(grep -c '^LSL-[A-P] ' "$WORK/list.txt")" = 16 ] || fail "lab list does not show 16 labs: $(cat "$WORK/list.txt")"

"$BIN" lab show LSL-Z > /dev/null 2>&1
[ $? = 2 ] || fail "lab show of an unknown key must exit 2"

"$BIN" lab run LSL-D --out "$WORK/d" --set parallel.dp=1 > "$WORK/d1.txt" 2>&1
[ $? = 2 ] || fail "a variation the fault cannot act on (dp = 1) must exit 2 before running"
[ ! -e "$WORK/d1" ] || fail "a refused variation wrote a bundle"

"$BIN" lab run LSL-D --out "$WORK/d" --quiet > "$WORK/d.txt" 2>&1
rc=$?
cat "$WORK/d.txt"
[ $rc = 0 ] || fail "lab run LSL-D exited $rc"
grep -q "^verdict: PASS" "$WORK/d.txt" || fail "no PASS verdict"
grep -q "^first divergence: trace vs predicted communication at step 2" "$WORK/d.txt" ||
  fail "skip-grad-allreduce was not caught first by the trace-vs-prediction view at step 2"
head -1 "$WORK/d/summary.md" | grep -q "LSL-D §4.2.1 Data parallelism" || fail "summary.md does not carry the lab's title"
grep -q "what to observe in $WORK/d" "$WORK/d.txt" || fail "the observe lines were not printed after the run"
for f in gate.json contract.json reference/checksums.jsonl parallel/trace/rank-00001.jsonl fault recovery; do
  [ -e "$WORK/d/$f" ] || fail "the bundle lacks $f"
done
grep -q "^every claim of the notes holds on this bundle" "$WORK/d.txt" || fail "lab run did not check the claims"
/usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" LSL-D "$WORK/d" \
  --plant "count prove.json#/stages name=fault exit_code=1 == 1 => count prove.json#/stages name=fault exit_code=0 == 1" \
  --plant "count parallel/metrics.jsonl diverging_ranks=* == 0 => count fault/metrics.jsonl diverging_ranks=* == 0" ||
  fail "LSL-D's claims"
echo "PASS"
