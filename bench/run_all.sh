#!/usr/bin/env bash
# make bench: every benchmark once, on this machine, with the figures docs/performance.md reports.
# Ratios measured in one run are what to compare; absolute numbers depend on the machine and its load.
set -euo pipefail
BUILD=${1:-build}
echo "== kernels (OPENBLAS_NUM_THREADS=1) =="
OPENBLAS_NUM_THREADS=1 "$BUILD/bench/kernels_bench"
echo "== data: tokenizer encode, corpus preparation =="
"$BUILD/bench/data_bench"
echo "== checkpoints: save/load vs raw disk =="
"$BUILD/bench/ckpt_bench"
echo "== one training step vs PyTorch eager (tiny, small) =="
/usr/bin/python3 "$(dirname "$0")/train_vs_torch.py" "$BUILD"
echo "== evidence: checksum and digest cost per element =="
"$BUILD/bench/evidence_bench"
# One rank per core (dp = 4, 2 or 1, the largest the cores allow; tiny's batch divides by each):
# oversubscribed ranks swing by ±15 % between rounds and hide a 3 % difference (docs/performance.md).
CORES=$(nproc)
NP=$(( CORES >= 4 ? 4 : (CORES >= 2 ? 2 : 1) ))
echo "== evidence on vs off, deterministic vs fast reduction (tiny, dp=$NP) =="
/usr/bin/python3 "$(dirname "$0")/evidence_overhead.py" "$BUILD" --np "$NP" --rounds 8 --steps 16
echo "== where the time goes: each rank's step by kind (small, dp1/dp2/tp2/pp2, fp32 and bf16) =="
/usr/bin/python3 "$(dirname "$0")/time_split.py" --bin "$BUILD/bin/shardproof" --preset small --steps 4
