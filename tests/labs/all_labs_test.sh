#!/usr/bin/env bash
# Every runnable lab end to end (label long: about 15 minutes on 2 cores, outside `make test`): `lab run KEY`
# must PASS with every claim of its observations holding on its bundle, and each claim, negated in a copy of
# the catalogue, must fail `lab check` (tests/support/lab_claims.py). Then every variation of each lab
# (`lab show KEY` lists them) the same way: `lab run KEY --variation NAME` must PASS with its own claims holding,
# each negated in a copy of the catalogue failing. Prints the claims checked per lab and variation. LSL-G's bf16
# variation runs with --against the lab's own run.
# Usage: all_labs_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"
keys=$("$BIN" lab list | awk '/^LSL-[A-P] / && !/unavailable/ {print $1}')
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
  for v in $("$BIN" lab show "$k" | awk '/^variation / {print $2}'); do
    against=()
    [ "$k/$v" = LSL-G/bf16 ] && against=(--against "$WORK/$k")
    start=$(date +%s)
    "$BIN" lab run "$k" --variation "$v" --out "$WORK/$k-$v" "${against[@]}" --quiet > "$WORK/$k-$v.txt" 2>&1
    rc=$?
    echo "$k variation $v: exit $rc in $(($(date +%s) - start)) s"
    [ $rc = 0 ] || { cat "$WORK/$k-$v.txt"; fail "lab run $k --variation $v exited $rc"; }
    grep -q "^every claim of the notes holds on this bundle" "$WORK/$k-$v.txt" || fail "$k $v: claims not checked"
    /usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" --variation "$v" \
      "$k" "$WORK/$k-$v" | tail -1 || fail "$k variation $v's claims"
    [ "${PIPESTATUS[0]}" = 0 ] || fail "$k variation $v's claims"
  done
done
# LSL-G's bf16 variation against the lab's own run: --against shows the parameters halved and the fp32 masters
# added to the optimizer state.
grep -q "memory param (MiB, rank 0 peak) .*(-50.0 %)" "$WORK/LSL-G-bf16.txt" || fail "--against does not show the halved parameters"
grep -q "memory optim (MiB, rank 0 peak) .*(+50.0 %)" "$WORK/LSL-G-bf16.txt" || fail "--against does not show the fp32 masters"
echo "PASS"
