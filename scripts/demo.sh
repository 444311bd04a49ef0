#!/usr/bin/env bash
# make demo: the main job on the bundled default. `shardproof prove` runs the four-stage protocol on
# configs/demo.toml (tiny model, dp 2 × pp 2 with ZeRO-1 on 4 ranks, 8 steps, one injected fault)
# and prints the gate, the first-divergence line, the verdict and the bundle path (docs/prove.md).
set -euo pipefail
SP=${1:-build/bin/shardproof}
OUT=${DEMO_OUT:-runs/demo-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$(dirname "$OUT")"
exec "$SP" prove --preset demo --out "$OUT" --quiet
