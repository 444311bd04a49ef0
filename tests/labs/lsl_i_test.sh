#!/usr/bin/env bash
# LSL-I, the plan lab, end to end (docs/labs.md §LSL-I): `lab run LSL-I` evaluates 2 clusters × 2 placements
# with the planner (no training: seconds), writes each case's plan.json + report.html, summary.md and
# gate.json, and passes. Then the gate is tested on planted damage, each re-derived by `lab verify`: a
# missing case, the fault placement's warning removed, the fault made faster than the sound placement, the
# clusters made equal, the dominant link moved, a figure the planner does not give, an impossible MFU in every
# plan with summary.md to match (issue 45), an edited summary.md. Each must fail naming its criterion, and the
# last line of `lab verify` must say FAIL as its exit code does.
# Every claim of its observations is checked against the output and must fail when planted wrong.
# Usage: lsl_i_test.sh SHARDPROOF WORKDIR
set -u
BIN=$1
WORK=$2
. "$(dirname "$0")/../support/sp_test.sh"  # fail
rm -rf "$WORK" && mkdir -p "$WORK" || fail "cannot create $WORK"
PY=/usr/bin/python3

"$BIN" lab list > "$WORK/list.txt" || fail "lab list exited $?"
grep -q '^LSL-I .* plan: flag dp-tp-pp' "$WORK/list.txt" || fail "lab list does not show LSL-I as a plan lab: $(cat "$WORK/list.txt")"
"$BIN" lab show LSL-I > "$WORK/show.txt" || fail "lab show LSL-I exited $?"
grep -q "shardproof lab run LSL-I --out runs/lsl-i" "$WORK/show.txt" || fail "lab show does not give the command"
grep -q "plan --cluster dgx-h100 --nodes 4 --model llama-7b" "$WORK/show.txt" || fail "lab show lacks the plan commands"

"$BIN" lab run LSL-I --out "$WORK/i" --set parallel.dp=2 > "$WORK/set.txt" 2>&1
[ $? = 2 ] || fail "--set on a plan lab must exit 2"
[ ! -e "$WORK/i" ] || fail "a refused run wrote files"

start=$(date +%s%N)
"$BIN" lab run LSL-I --out "$WORK/i" > "$WORK/i.txt" 2>&1
rc=$?
end=$(date +%s%N)
cat "$WORK/i.txt"
echo "lab run LSL-I: $(( (end - start) / 1000000 )) ms"
[ $rc = 0 ] || fail "lab run LSL-I exited $rc"
grep -q "^verdict: PASS" "$WORK/i.txt" || fail "no PASS verdict"
for c in dgx-a100-tp-dp-pp dgx-a100-dp-tp-pp dgx-h100-tp-dp-pp dgx-h100-dp-tp-pp; do
  for f in plan.json report.html; do [ -s "$WORK/i/$c/$f" ] || fail "$c/$f was not written"; done
done
grep -q '"verdict": "PASS"' "$WORK/i/gate.json" || fail "gate.json is not PASS"
[ "$(grep -c '^| dgx-' "$WORK/i/summary.md")" = 4 ] || fail "summary.md does not have 4 case rows"
grep -q '^| dgx-a100 | `dp-tp-pp` .*inter-node infiniband.*\*\*1\*\*: tp groups' "$WORK/i/summary.md" ||
  fail "summary.md does not show the flagged fault placement on InfiniBand"
"$BIN" lab run LSL-I --out "$WORK/i" > /dev/null 2>&1
[ $? = 2 ] || fail "a second run into the same DIR must exit 2"
"$BIN" lab verify LSL-I "$WORK/i" > "$WORK/v.txt" 2>&1 || fail "lab verify of the intact output failed: $(cat "$WORK/v.txt")"
# Every claim of the lab's observations holds on its output; each negated, and the fault placement's tp
# link claimed intra-node, must fail (tests/support/lab_claims.py).
$PY "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" LSL-I "$WORK/i" \
  --plant "value dgx-a100-dp-tp-pp/plan.json /placement/links/tp/link == inter-node infiniband => value dgx-a100-dp-tp-pp/plan.json /placement/links/tp/link == intra-node nvswitch" ||
  fail "LSL-I's claims"

# plant DAMAGE CRITERION: a copy of the output with DAMAGE (python on the copy's path) must fail CRITERION.
plant() {
  local name=$1 criterion=$2 code=$3
  rm -rf "$WORK/$name" && cp -r "$WORK/i" "$WORK/$name"
  $PY - "$WORK/$name" <<EOF || fail "$name: the edit did not apply"
import json, os, shutil, sys
d = sys.argv[1]
def load(c): return json.load(open(os.path.join(d, c, "plan.json")))
def save(c, j): json.dump(j, open(os.path.join(d, c, "plan.json"), "w"))
$code
EOF
  "$BIN" lab verify LSL-I "$WORK/$name" > "$WORK/$name.txt" 2>&1
  local rc=$?
  [ $rc = 1 ] || fail "$name: lab verify exited $rc, expected 1: $(cat "$WORK/$name.txt")"
  grep -q "^  FAIL  $criterion" "$WORK/$name.txt" || fail "$name: '$criterion' did not fail: $(cat "$WORK/$name.txt")"
  echo "planted $name: fails '$criterion'"
}
plant missing-case "every case evaluated" 'shutil.rmtree(os.path.join(d, "dgx-h100-dp-tp-pp"))'
plant missing-case-slower "fault placement slower" 'shutil.rmtree(os.path.join(d, "dgx-h100-dp-tp-pp"))'
plant no-warning "fault placement flagged" '
j = load("dgx-a100-dp-tp-pp"); j["placement"]["warnings"] = []; save("dgx-a100-dp-tp-pp", j)'
plant sound-warned "sound placements not flagged" '
j = load("dgx-h100-tp-dp-pp"); j["placement"]["warnings"] = ["tp groups cross nodes"]; save("dgx-h100-tp-dp-pp", j)'
plant fault-faster "fault placement slower" '
j = load("dgx-h100-dp-tp-pp"); j["step"]["seconds"] = load("dgx-h100-tp-dp-pp")["step"]["seconds"]; save("dgx-h100-dp-tp-pp", j)'
plant same-clusters "clusters differ" '
j = load("dgx-h100-tp-dp-pp"); j["step"]["seconds"] = load("dgx-a100-tp-dp-pp")["step"]["seconds"]; save("dgx-h100-tp-dp-pp", j)'
plant dominant-moved "fault dominated by the inter-node link" '
j = load("dgx-a100-dp-tp-pp"); j["step"]["dominant_comm"] = "dp grad_sync on intra-node nvswitch"; save("dgx-a100-dp-tp-pp", j)'
plant wrong-placement "every case evaluated" '
j = load("dgx-a100-dp-tp-pp"); j["inputs"]["strategy"]["axis_order"] = "tp-dp-pp"; save("dgx-a100-dp-tp-pp", j)'
plant no-report "every case evaluated" 'os.remove(os.path.join(d, "dgx-a100-tp-dp-pp", "report.html"))'
plant oom "every case fits" '
j = load("dgx-a100-tp-dp-pp"); j["memory"]["peak_bytes"] = j["memory"]["limit_bytes"] + 1; save("dgx-a100-tp-dp-pp", j)'

# A possible figure that is not the planner's: only the re-derivation from the lab's inputs sees it.
plant mfu-edited "every plan re-derived from its inputs" '
j = load("dgx-h100-tp-dp-pp"); j["step"]["mfu"] = 0.9; j["step"]["hfu"] = 0.9; save("dgx-h100-tp-dp-pp", j)'
grep -q "dgx-h100-tp-dp-pp/plan.json: /step/hfu is 0.9, the planner gives" "$WORK/mfu-edited.txt" ||
  fail "the re-derivation does not name the edited figure: $(cat "$WORK/mfu-edited.txt")"

# Issue 45: "mfu": 7.0 (700 %) in every plan.json and summary.md edited to match passed `lab check` (13 of 13
# claims) and `lab verify` (PASS, exit 0). An impossible value is refused, and no edited plan re-derives.
rm -rf "$WORK/forged" && cp -r "$WORK/i" "$WORK/forged"
$PY - "$WORK/forged" <<'EOF2' || fail "the forgery did not apply"
import json, os, re, sys
d = sys.argv[1]
for c in os.listdir(d):
    p = os.path.join(d, c, "plan.json")
    if os.path.isfile(p):
        j = json.load(open(p)); j["step"]["mfu"] = 7.0; json.dump(j, open(p, "w"), indent=1)
s = open(os.path.join(d, "summary.md")).read()
open(os.path.join(d, "summary.md"), "w").write(re.sub(r"\| [0-9.]+ % \|", "| 700.0 % |", s))
EOF2
"$BIN" lab check LSL-I "$WORK/forged" > "$WORK/forged-check.txt" 2>&1
[ $? = 1 ] || fail "lab check of plans with mfu 7.0 must exit 1: $(cat "$WORK/forged-check.txt")"
grep -q "^FAIL: .*/plan.json: step.mfu is 7.0, outside \[0, 1\]" "$WORK/forged-check.txt" ||
  fail "lab check does not name the impossible MFU: $(tail -3 "$WORK/forged-check.txt")"
"$BIN" lab verify LSL-I "$WORK/forged" > "$WORK/forged.txt" 2>&1
[ $? = 1 ] || fail "lab verify of plans with mfu 7.0 must exit 1"
grep -q "^  FAIL  every plan re-derived from its inputs" "$WORK/forged.txt" || fail "no re-derivation row failed"
grep -q "step.mfu is 7.0, outside \[0, 1\]" "$WORK/forged.txt" || fail "lab verify does not name the MFU"
[ "$(tail -1 "$WORK/forged.txt" | cut -c1-13)" = "verdict: FAIL" ] || fail "the last line is not the FAIL verdict"
echo "planted mfu 7.0 in every plan with summary.md to match: lab check and lab verify exit 1 naming it"

# An edited summary.md with the plans intact: the gate passes but the file differs from its derivation; the
# last line says FAIL as the exit code does (issue 45: it said "verdict: PASS" with exit 1).
rm -rf "$WORK/edited" && cp -r "$WORK/i" "$WORK/edited"
sed -i 's/Verdict: PASS/Verdict: PASS (checked by hand)/' "$WORK/edited/summary.md"
"$BIN" lab verify LSL-I "$WORK/edited" > "$WORK/edited.txt" 2>&1
[ $? = 1 ] || fail "an edited summary.md must fail lab verify"
grep -q "summary.md: differs" "$WORK/edited.txt" || fail "lab verify does not name the edited summary.md"
tail -1 "$WORK/edited.txt" | grep -q "^verdict: FAIL: 1 derived file(s) differ" ||
  fail "lab verify exits 1 but its last line is: $(tail -1 "$WORK/edited.txt")"
"$BIN" lab verify LSL-D "$WORK/i" > /dev/null 2>&1
[ $? = 2 ] || fail "lab verify of a proof lab must exit 2"
echo "PASS"
