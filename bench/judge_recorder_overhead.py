#!/usr/bin/python3
"""The recorder's cost (docs/judge.md §cost): one DDP step of examples/torch/train_llama.py (Debian's torch) or,
with --preset hf100m, of Hugging Face's LlamaForCausalLM at 106 M parameters under torch 2.x DDP
(examples/hf_ddp/train.py, run on .venv's python), with shardproof_torch recording checksums every step and no
anchor, against the same loop without the recorder (--no-record: DDP's own C++ reduction), in paired rounds that
alternate the two on the same machine; then the bytes of one anchor (the state around a step, which the judge
replays).

    bench/judge_recorder_overhead.py [--rounds 4] [--steps 8] [--world 2] [--preset bench|test|hf100m]
                                     [--micro-batches 4] [--out DIR]

Per run: the median of steps 1.. (step 0 warms up, and DDP reduces it as one bucket); the figure is the ratio
of the two medians of each round, and its median over the rounds, in wall time and in rank 0's CPU time
(time.process_time: what the step itself computed, less exposed to other processes' load than wall time);
the ratio of the fastest step of each (over every round: the step least disturbed by other load); and the
recorder's own CPU time per step (its calls, timed inside Recorder) over the step's CPU time without it: the
share least exposed to the load, since neither side waits for the other rank.
Never a test: timings depend on the machine and its load, so the figure is reported (docs/performance.md), not
asserted.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
EXAMPLES = {"torch": (sys.executable, os.path.join(ROOT, "examples", "torch", "train_llama.py"), ["--strategy", "ddp"]),
            "hf": (os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, "examples", "hf_ddp", "train.py"),
                   [])}
PRESETS = {  # the published PyTorch figure's shape (reference/published-numbers.md: 4.2M parameters), and the tests'
    "bench": ("torch", ["--vocab", "2048", "--dim", "256", "--ffn", "688", "--layers", "4", "--heads", "8",
                        "--kv-heads", "4", "--seq", "128", "--micro-batch", "4", "--bucket-mb", "25"]),
    "test": ("torch", []),
    # issue 42's size: 105.8 M parameters (vocabulary 32,000, hidden 768, 8 layers of 12 heads, MLP 2,048), micro-batches
    # of 4 x 512 tokens: 4,096 tokens per rank and step at --world 2 --micro-batches 4
    "hf100m": ("hf", ["--vocab", "32000", "--dim", "768", "--ffn", "2048", "--layers", "8", "--heads", "12",
                      "--kv-heads", "12", "--seq", "512", "--micro-batch", "4", "--bucket-mb", "25"]),
}


def run(out, steps, world, preset, record, anchor_every, micro_batches):
    timing = out + ".timing.jsonl"
    for p in (out, timing):
        shutil.rmtree(p, ignore_errors=True) if os.path.isdir(p) else (os.path.exists(p) and os.remove(p))
    example, flags = PRESETS[preset]
    python, script, fixed = EXAMPLES[example]
    cmd = [python, script] + fixed + ["--world", str(world), "--steps", str(steps), "--out", out,
                                      "--quiet", "--timing", timing, "--anchor-every", str(anchor_every),
                                      "--micro-batches", str(micro_batches)] + flags
    if not record:
        cmd.append("--no-record")
    subprocess.run(cmd, check=True)
    rows = [json.loads(line) for line in open(timing)]
    own = [b["recorder_seconds"] - a["recorder_seconds"] for a, b in zip(rows, rows[1:])]
    own_cpu = [b["recorder_cpu_seconds"] - a["recorder_cpu_seconds"] for a, b in zip(rows, rows[1:])]
    return ({"median": statistics.median(r["seconds"] for r in rows[1:]), "min": min(r["seconds"] for r in rows[1:])},
            {"median": statistics.median(r["cpu_seconds"] for r in rows[1:]),
             "min": min(r["cpu_seconds"] for r in rows[1:])},
            {"median": statistics.median(own), "min": min(own), "cpu": statistics.median(own_cpu)} if own
            else {"median": 0.0, "min": 0.0, "cpu": 0.0})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="bench")
    ap.add_argument("--micro-batches", type=int, default=4, help="per step, global (the tokens per step)")
    ap.add_argument("--out", default=None, help="scratch directory (default: a temporary one)")
    a = ap.parse_args()
    work = a.out or tempfile.mkdtemp(prefix="judge-overhead-")
    ratios, cpu_ratios, own_shares, off, on, own = [], [], [], [], [], []
    for r in range(a.rounds):
        t_off, c_off, _ = run(os.path.join(work, "off"), a.steps, a.world, a.preset, False, 0, a.micro_batches)
        t_on, c_on, t_own = run(os.path.join(work, "on"), a.steps, a.world, a.preset, True, 0, a.micro_batches)
        off.append(t_off)
        on.append(t_on)
        own.append(t_own)
        ratios.append(t_on["median"] / t_off["median"])
        cpu_ratios.append(c_on["median"] / c_off["median"])
        own_shares.append(t_own["cpu"] / c_off["median"])
        print(f"round {r}: step without recorder {t_off['median'] * 1e3:.1f} ms ({c_off['median'] * 1e3:.1f} ms CPU on "
              f"rank 0), with checksums every step {t_on['median'] * 1e3:.1f} ms ({c_on['median'] * 1e3:.1f} ms CPU; "
              f"in the recorder's calls {t_own['median'] * 1e3:.1f} ms, {t_own['cpu'] * 1e3:.1f} ms CPU = "
              f"{own_shares[-1]:.1%} of the step's CPU without it); ratio {ratios[-1]:.3f} wall, "
              f"{cpu_ratios[-1]:.3f} CPU; fastest steps {t_off['min'] * 1e3:.1f} / {t_on['min'] * 1e3:.1f} ms",
              flush=True)
    anchored = os.path.join(work, "anchored")
    run(anchored, 2, a.world, a.preset, True, 1, a.micro_batches)
    anchor_dirs = [os.path.join(anchored, "anchors", s) for s in sorted(os.listdir(os.path.join(anchored, "anchors")))]
    anchor_bytes = [sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d)) for d in anchor_dirs]
    fastest_off, fastest_on = min(x["min"] for x in off), min(x["min"] for x in on)
    print(json.dumps({"preset": a.preset, "micro_batches": a.micro_batches, "world": a.world, "rounds": a.rounds,
                      "steps": a.steps,
                      "median_step_s_without": statistics.median(x["median"] for x in off),
                      "median_step_s_with": statistics.median(x["median"] for x in on),
                      "overhead": statistics.median(ratios) - 1,
                      "overhead_cpu": statistics.median(cpu_ratios) - 1,
                      "fastest_step_s_without": fastest_off, "fastest_step_s_with": fastest_on,
                      "overhead_fastest": fastest_on / fastest_off - 1,
                      "recorder_s_per_step": statistics.median(x["median"] for x in own),
                      "recorder_s_per_step_min": min(x["min"] for x in own), "ratios": [round(x, 4) for x in ratios],
                      "recorder_cpu_share": statistics.median(own_shares),
                      "bytes_per_anchor": anchor_bytes}, indent=1))
    if a.out is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
