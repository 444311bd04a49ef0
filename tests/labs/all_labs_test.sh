#!/usr/bin/env bash
# Every runnable lab end to end (label long: about 15 minutes on 2 cores, outside `make test`): `lab run KEY`
# must PASS with every claim of its observations holding on its bundle, and each claim, negated in a copy of
# the catalogue, must fail `lab check` (tests/support/lab_claims.py). Prints the claims checked per lab.
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
  /usr/bin/python3 "$(dirname "$0")/../support/lab_claims.py" --bin "$BIN" --work "$WORK/claims" "$k" "$WORK/$k" |
    tail -1 || fail "$k's claims"
  [ "${PIPESTATUS[0]}" = 0 ] || fail "$k's claims"
done
echo "PASS"
