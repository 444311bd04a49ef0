#!/usr/bin/env bash
# Runs one fault program under mpirun and asserts how the job ends: non-zero exit, within LIMIT
# seconds (a hang is killed by `timeout` and fails), with stderr matching every --expect regex.
# Optionally runs the trace checker on the run directory afterwards and matches its output too.
#   fault_driver.sh --limit S --dir RUN_DIR [--expect REGEX]... [--check TOOL --check-expect REGEX]... -- CMD...
set -u
limit=60 dir="" check="" expects=() check_expects=()
while [ $# -gt 0 ]; do
  case "$1" in
    --limit) limit="$2"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --expect) expects+=("$2"); shift 2 ;;
    --check) check="$2"; shift 2 ;;
    --check-expect) check_expects+=("$2"); shift 2 ;;
    --) shift; break ;;
    *) echo "fault_driver: unknown option $1" >&2; exit 2 ;;
  esac
done
[ -n "$dir" ] || { echo "fault_driver: --dir is required" >&2; exit 2; }
rm -rf "$dir" && mkdir -p "$dir"
err="$dir.stderr"
start=$(date +%s)
timeout --kill-after=5 "$limit" "$@" >"$dir.stdout" 2>"$err"
rc=$?
elapsed=$(( $(date +%s) - start ))
echo "fault_driver: exit status $rc after ${elapsed}s: $*"
fail=0
if [ "$rc" -eq 0 ]; then echo "FAIL: the job exited 0; a fault must end it with a non-zero status"; fail=1; fi
# `timeout` exits 124 (or 137 after --kill-after); mpirun itself may exit 137 when a rank died of
# SIGKILL, so the elapsed time decides which one happened.
if [ "$rc" -eq 124 ] || [ "$elapsed" -ge "$limit" ]; then echo "FAIL: the job hung (stopped after ${limit}s)"; fail=1; fi
for re in "${expects[@]}"; do
  if ! grep -Eq -- "$re" "$err"; then echo "FAIL: stderr does not match /$re/"; fail=1; fi
done
if [ -n "$check" ]; then
  "$check" trace check "$dir" >"$dir.check" 2>&1
  crc=$?
  echo "fault_driver: trace check exit status $crc"
  cat "$dir.check"
  if [ "$crc" -ne 1 ]; then echo "FAIL: trace check should exit 1 (inconsistent)"; fail=1; fi
  for re in "${check_expects[@]}"; do
    if ! grep -Eq -- "$re" "$dir.check"; then echo "FAIL: trace check output does not match /$re/"; fail=1; fi
  done
fi
if [ "$fail" -ne 0 ]; then echo "---- stderr of the job ----"; cat "$err"; fi
exit "$fail"
