#!/usr/bin/env bash
# Every runnable lab end to end (label long: about 15 minutes on 2 cores, outside `make test`): `lab run KEY`
# must PASS with every claim of its observations holding on its bundle, and each claim, negated in a copy of
# the catalogue, must fail `lab check` (tests/support/lab_claims.py). Prints the claims checked per lab.
# Then LSL-G's bf16 variation with --against the lab's own run.
# Usage: all_labs_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"
keys=$("$BIN" lab list | awk '/^LSL-[A-O] / && !/unavailable/ {print $1}')
[ -n "$keys" ] || fail "lab list shows no runnable lab"
for k in $keys; do
  start=$(date +%s)
  "$BIN" lab run "$k" --out "$WORK/$k" --quiet > "$WORK/$k.txt" 2>&1
  rc=$?
  echo "$k: exit $rc in $(($(date +%s) - start)) s"
  [ $rc = 0 ] || { cat "$WORK/$k.txt"; fail "lab run $k exited $rc"; }
  plants=()
  # The notes as LSL-E once had them (issue 33), planted as claims: each must fail.
  [ "$k" = LSL-E ] && plants=(--plant "idle_end_stage parallel == 1 => idle_end_stage parallel == 0"
    --plant "count parallel/trace/rank-*.jsonl group=tp* phase=backward op=all_reduce == 0 => count parallel/trace/rank-*.jsonl group=tp* phase=backward op=all_reduce > 0"
    --plant "count parallel/trace/rank-*.jsonl group=pp* op=send == 0 => count parallel/trace/rank-*.jsonl group=pp* op=send > 0")
  /usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" "$k" "$WORK/$k" "${plants[@]}" |
    tail -1 || fail "$k's claims"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "$k's claims"
done
# LSL-G's bf16 variation against the lab's own run: the claims that differ are reported, not failed, and
# --against shows the parameters halved and the fp32 masters added to the optimizer state.
"$BIN" lab run LSL-G --out "$WORK/g-bf16" --set train.precision=bf16 --against "$WORK/LSL-G" --quiet > "$WORK/g-bf16.txt" 2>&1 ||
  { cat "$WORK/g-bf16.txt"; fail "lab run LSL-G --set train.precision=bf16 exited $?"; }
grep -q "claims differ under your --set variation" "$WORK/g-bf16.txt" || fail "the variation's claims were not reported"
grep -q "memory param (MiB, rank 0 peak) .*(-50.0 %)" "$WORK/g-bf16.txt" || fail "--against does not show the halved parameters"
grep -q "memory optim (MiB, rank 0 peak) .*(+50.0 %)" "$WORK/g-bf16.txt" || fail "--against does not show the fp32 masters"
echo "PASS"
