#!/usr/bin/env bash
# LSL-P, the judge lab, end to end (about 15 s on 2 cores): `lab run LSL-P` records the example PyTorch script
# (examples/torch/train_llama.py, tp = 2, 3 steps) as it is and with tp-norm-unreduced planted, judges both
# (`shardproof judge`), and must PASS with every claim of its observations holding; then each claim, negated
# in a copy of the catalogue, and the realistic wrong notes below must fail `lab check`
# (tests/support/lab_claims.py). Also: --set is refused, a Python without torch is refused naming the package
# and the fix, nothing written in either case; a second run into the same DIR is refused; `lab verify` is
# a plan lab's.
# Usage: judge_lab_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"

"$BIN" lab list | grep -q "^LSL-P .* judge: tp-norm-unreduced " || fail "lab list does not show LSL-P as a judge lab"
"$BIN" lab show LSL-P | grep -q "shardproof judge DIR/fault" || fail "lab show LSL-P does not print the judge command"

"$BIN" lab run LSL-P --out "$WORK/set" --set parallel.dp=2 > "$WORK/set.txt" 2>&1
[ $? = 2 ] || fail "lab run LSL-P --set must exit 2"
[ ! -e "$WORK/set" ] || fail "a refused --set wrote a bundle"

# A Python that cannot import torch (as on a host without python3-torch): exit 2 naming the package and the fix.
printf '#!/bin/sh\necho "ModuleNotFoundError: No module named torch" >&2\nexit 1\n' > "$WORK/python-without-torch"
chmod +x "$WORK/python-without-torch"
SHARDPROOF_PYTHON="$WORK/python-without-torch" "$BIN" lab run LSL-P --out "$WORK/nt" > "$WORK/nt.txt" 2>&1
rc=$?
cat "$WORK/nt.txt"
[ $rc = 2 ] || fail "lab run LSL-P without torch exited $rc, not 2"
grep -q "cannot import torch" "$WORK/nt.txt" && grep -q "python3-torch" "$WORK/nt.txt" &&
  grep -q "scripts/install-deps.sh" "$WORK/nt.txt" || fail "the missing torch is not named with its fix"
[ ! -e "$WORK/nt" ] || fail "lab run without torch wrote a bundle"

start=$(date +%s)
"$BIN" lab run LSL-P --out "$WORK/p" --quiet > "$WORK/p.txt" 2>&1
rc=$?
cat "$WORK/p.txt"
echo "lab run LSL-P: exit $rc in $(($(date +%s) - start)) s"
[ $rc = 0 ] || fail "lab run LSL-P exited $rc"
grep -q "^verdict: PASS" "$WORK/p.txt" || fail "no lab verdict PASS"
grep -q "^run: judged in .* exit 0 (PASS)" "$WORK/p.txt" || fail "the run as it is was not judged PASS"
grep -q "^fault: judged in .* exit 1 (FAIL); first divergence: replicas, step 0, grad, model.layers.0.input_layernorm.weight, ranks 0, 1" "$WORK/p.txt" ||
  fail "the planted bug's first divergence is not printed"
grep -q "^every claim of the notes holds on this bundle" "$WORK/p.txt" || fail "lab run did not check the claims"
for f in lab.json run/judge/gate.json run/judge/summary.md run/judge/report.html fault/judge/first_divergence.json \
  fault/judge/checksums.jsonl; do
  [ -e "$WORK/p/$f" ] || fail "the bundle lacks $f"
done
grep -q '"key": "LSL-P"' "$WORK/p/lab.json" || fail "lab.json does not carry the lab"

"$BIN" lab run LSL-P --out "$WORK/p" > "$WORK/again.txt" 2>&1
[ $? = 2 ] || fail "a second lab run into the same DIR must exit 2"
"$BIN" lab verify LSL-P "$WORK/p" > /dev/null 2>&1
[ $? = 2 ] || fail "lab verify of a judge lab must exit 2"

# The wrong notes a student might write: the communication checks catch the bug; the gradient view fires first;
# the bug changes the number of all-reduces; three rows fail (the notes said so until issue 45: four do).
/usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" LSL-P "$WORK/p" \
  --plant "count fault/judge/gate.json#/criteria name=traffic* passed=true == 1 => count fault/judge/gate.json#/criteria name=traffic* passed=false == 1" \
  --plant "value fault/judge/first_divergence.json /first/view == replicas => value fault/judge/first_divergence.json /first/view == gradients" \
  --plant "count fault/trace/rank-*.jsonl / count run/trace/rank-*.jsonl == 1 => count fault/trace/rank-*.jsonl / count run/trace/rank-*.jsonl < 1" \
  --plant "count fault/judge/gate.json#/criteria required=true passed=false == 4 => count fault/judge/gate.json#/criteria required=true passed=false == 3" ||
  fail "LSL-P's claims"
echo "PASS"
