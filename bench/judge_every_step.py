#!/usr/bin/python3
"""Every step of a ≥ 100 M-parameter LLaMA recorded and judged (docs/performance.md §"The every-step judge"):
the worked example (examples/torch/train_llama.py: a LLaMA with Hugging Face's names and math, built from the
config.json this script passes as sizes; nothing downloaded) trains S steps in one process, recorded every step
by shardproof_torch, while `shardproof judge --follow DIR` judges each step as it is recorded and discards its
gradients. Measured: the recording's bytes per step (gradients, checksums, ids) and once (the state), the disk the
recording occupies at most while followed (sampled), the recorder's CPU share of a step, and the judge's seconds
per step (its own work, not its waiting), with the verdict.

    bench/judge_every_step.py --bin build/bin/shardproof --work /work/tmp/jes [--steps 50] [--layers 8]

Not a timed test: figures only, printed as JSON and as the markdown row docs/performance.md quotes. Report the
CPU (lscpu) and the load (uptime) with them.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def du(path):
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--dim", type=int, default=768)
    ap.add_argument("--ffn", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--micro-batches", type=int, default=4)
    args = ap.parse_args()
    out = os.path.join(args.work, "rec")
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    timing = os.path.join(args.work, "timing.jsonl")
    follower = subprocess.Popen(["/usr/bin/time", "-v", args.bin, "judge", "--follow", out, "--follow-timeout", "3600"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = {"bytes": 0}
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            peak["bytes"] = max(peak["bytes"], du(out))
            time.sleep(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.time()
    rec = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "examples", "torch", "train_llama.py"),
                          "--strategy", "single", "--steps", str(args.steps), "--out", out, "--quiet",
                          "--vocab", str(args.vocab), "--dim", str(args.dim), "--ffn", str(args.ffn),
                          "--layers", str(args.layers), "--heads", str(args.heads), "--kv-heads", str(args.heads),
                          "--seq", str(args.seq), "--micro-batch", "1", "--micro-batches", str(args.micro_batches),
                          "--timing", timing], capture_output=True, text=True)
    recorded = time.time() - t0
    fout, ferr = follower.communicate(timeout=7200)
    stop.set()
    sampler.join()
    if rec.returncode != 0:
        sys.exit(f"the run failed: {rec.stderr[-2000:]}")
    steps = [json.loads(x) for x in open(timing)]
    judge_seconds = [float(m.group(1)) for m in re.finditer(r"^step \d+ \(([0-9.]+) s\)", fout, re.M)]
    maxrss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", ferr)
    cpu = re.search(r"User time \(seconds\): ([0-9.]+)", ferr), re.search(r"System time \(seconds\): ([0-9.]+)", ferr)
    seal = json.load(open(os.path.join(out, "seal", "rank-00000.json")))["files"]

    def sealed(prefix):
        return sum(e["bytes"] for f, e in seal.items() if f.startswith(prefix))

    contract = json.load(open(os.path.join(out, "contract.json")))
    from_cfg = contract["model"]
    psi = (2 * from_cfg["vocab_size"] * from_cfg["hidden_size"] + from_cfg["hidden_size"] +
           from_cfg["num_hidden_layers"] * (2 * from_cfg["hidden_size"] + 4 * from_cfg["hidden_size"] ** 2 +
                                            3 * from_cfg["hidden_size"] * from_cfg["intermediate_size"]))
    records = sum(os.path.getsize(os.path.join(out, d, f)) for d in ("records", "trace")
                  for f in os.listdir(os.path.join(out, d)))
    result = {
        "parameters": psi, "steps": args.steps, "tokens_per_step": args.micro_batches * args.seq,
        "grads_bytes_per_step": sealed("grads/") / args.steps,
        "tokens_bytes_per_step": sealed("tokens/") / args.steps,
        "records_and_trace_bytes_per_step": records / args.steps,
        "state_bytes_once": sealed("state/"),
        "peak_disk_bytes_while_followed": peak["bytes"],
        "written_bytes_total": sealed(""),
        "final_disk_bytes": du(out),
        "step_seconds_median": sorted(s["seconds"] for s in steps)[len(steps) // 2],
        # The recorder's CPU seconds are cumulative: each step's own is the difference.
        "recorder_cpu_share_median": sorted((b["recorder_cpu_seconds"] - a["recorder_cpu_seconds"]) / b["cpu_seconds"]
                                            for a, b in zip(steps, steps[1:]))[(len(steps) - 1) // 2]
        if len(steps) > 1 else None,
        "judge_seconds_per_step_median": sorted(judge_seconds)[len(judge_seconds) // 2] if judge_seconds else None,
        "judge_seconds_per_step_max": max(judge_seconds) if judge_seconds else None,
        "judge_cpu_seconds_total": float(cpu[0].group(1)) + float(cpu[1].group(1)) if all(cpu) else None,
        "judge_max_rss_bytes": int(maxrss.group(1)) * 1024 if maxrss else None,
        "recording_wall_seconds": recorded,
        "judged_steps": len(judge_seconds),
        "verdict": (re.search(r"^judge: (\w+)", fout, re.M) or [None, None])[1],
        "judge_exit": follower.returncode,
    }
    print(json.dumps(result, indent=2))
    print(f"| {psi / 1e6:.1f} M | {args.steps} | {result['tokens_per_step']} | "
          f"{result['grads_bytes_per_step'] / 1e6:.1f} MB | {result['state_bytes_once'] / 1e6:.0f} MB | "
          f"{result['peak_disk_bytes_while_followed'] / 1e9:.2f} GB | {result['step_seconds_median']:.1f} s | "
          f"{result['judge_seconds_per_step_median']} s | {result['verdict']} |")
    return 0 if result["verdict"] == "PASS" and len(judge_seconds) == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
