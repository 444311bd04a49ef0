#!/usr/bin/env bash
# One catalogued variation end to end in `make test` (docs/formats/labs.md §Variations): LSL-D with ZeRO-1,
# asked for as a learner types it (`--set parallel.zero=1`, exactly the variation's sets, so the variation's
# own claims apply and fail the run if one does not hold). Then every claim of the variation, each negated in a
# copy of the catalogue, and the note a learner would write from the lab's own run (an all_gather in grad_sync)
# planted, must fail `lab check --variation` (tests/support/lab_claims.py); the lab's own claims do not hold on
# this bundle. About 70 s on 2 loaded cores. Every variation of every lab: labs.all_claims (label long).
# Usage: lab_variation_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"

"$BIN" lab run LSL-D --variation nope --out "$WORK/x" > "$WORK/x.txt" 2>&1
[ $? = 2 ] || fail "an unknown variation must exit 2"
grep -q "its variations are zero1" "$WORK/x.txt" || fail "the unknown variation's error does not list the lab's: $(cat "$WORK/x.txt")"
[ ! -e "$WORK/x" ] || fail "an unknown variation wrote a bundle"

"$BIN" lab run LSL-D --set parallel.zero=1 --out "$WORK/d" --quiet > "$WORK/d.txt" 2>&1
rc=$?
cat "$WORK/d.txt"
[ $rc = 0 ] || fail "lab run LSL-D --set parallel.zero=1 exited $rc"
grep -q "^LSL-D §4.2.1 Data parallelism, variation zero1: 2 ranks" "$WORK/d.txt" || fail "the variation was not recognised"
grep -q "^every claim of the notes holds on this bundle (8 claims)" "$WORK/d.txt" || fail "the variation's claims were not checked"
head -1 "$WORK/d/summary.md" | grep -q "(variation zero1)" || fail "summary.md does not name the variation"
"$BIN" lab check LSL-D "$WORK/d" > "$WORK/base.txt" 2>&1
[ $? = 1 ] || fail "the lab's own claims must not all hold on the variation's bundle"
/usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" --variation zero1 LSL-D \
  "$WORK/d" \
  --plant "count parallel/trace/rank-00000.jsonl group=dp* phase=grad_sync op=all_gather == 0 => count parallel/trace/rank-00000.jsonl group=dp* phase=grad_sync op=all_gather step=1 == 6" ||
  fail "LSL-D variation zero1's claims"
echo "PASS"
