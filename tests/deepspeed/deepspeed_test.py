"""`--deepspeed ds_config.json` end to end (docs/deepspeed.md).

Cases:
  prove_np2, prove_np4  the bundled example as README proves it, `shardproof prove --deepspeed
                        examples/deepspeed/ds_config.json --model-config examples/deepspeed/config.json --np N`,
                        for 6 steps: PASS with the protocol's fault caught, `verify` re-derives PASS, and the
                        contract records the ds_config (its SHA-256, the mapped keys) and its values (bf16,
                        ZeRO-2, the WarmupDecayLR schedule, the batch at dp = N) and the HF model file's.
  cli                   `config show --json` (--set wins over the ds_config; the mapping per key), `plan --deepspeed`
                        (the ZeRO stage and batch reach the plan), `compare --deepspeed` (dp1 and zero2-dp2 both
                        run the ds_config and match), `train --deepspeed` under mpirun -np 2 (dp from the world).
  bad_input             under `mpirun -np 2 shardproof train --deepspeed BAD`: malformed JSON, a wrong type, an
                        inconsistent batch and a refused key exit 2 on every rank with the same message naming
                        the key, and nothing is written to --out.
Usage: deepspeed_test.py CASE --bin shardproof --source DIR --work DIR
"""
import argparse
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402
from sp_test import fail  # noqa: E402

# A small model and 6 steps, so that the five launches of a protocol take seconds (as tests/faults/).
SHORT = ["train.seq_len=64", "train.steps=6", "train.eval_every=3", "train.eval_batches=2", "prove.checkpoint_step=3",
         "prove.eval_margin=0.25"]
SMALL = ["model.dim=128", "model.ffn_dim=344", "model.n_layers=4", "model.max_seq=64"] + SHORT
run = functools.partial(T.run, echo=True)


def prove(args, np):
    ds = os.path.join(args.source, "examples", "deepspeed", "ds_config.json")
    hf = os.path.join(args.source, "examples", "deepspeed", "config.json")
    out = os.path.join(args.work, f"prove_np{np}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.bin, "prove", "--deepspeed", ds, "--model-config", hf, "--np", str(np), "--out", out, "--quiet"]
    for s in SHORT:
        cmd += ["--set", s]
    p = run(cmd)
    print(p.stdout[-5000:])
    print(p.stderr[-3000:])
    if p.returncode != 0 or "verdict: PASS" not in p.stdout:
        fail(f"prove --np {np} exited {p.returncode}")
    gate = json.load(open(os.path.join(out, "gate.json")))
    if gate.get("verdict") != "PASS":
        fail(f"gate.json verdict {gate.get('verdict')}")
    v = run([args.bin, "verify", out])
    if v.returncode != 0:
        fail(f"verify exited {v.returncode}: {v.stdout[-2000:]}")
    contract = json.load(open(os.path.join(out, "contract.json")))
    c = contract["config"]
    want_sha = hashlib.sha256(open(ds, "rb").read()).hexdigest()
    d = c.get("deepspeed")
    if not d or d["sha256"] != want_sha:
        fail(f"contract config.deepspeed {d and d.get('sha256')} != sha256 of the file {want_sha}")
    mc = c.get("model_config")
    if not mc or mc["sha256"] != hashlib.sha256(open(hf, "rb").read()).hexdigest():
        fail(f"contract config.model_config {mc and mc.get('sha256')} is not the HF config.json's")
    hf_json = json.load(open(hf))
    for key, want in (("dim", hf_json["hidden_size"]), ("n_kv_heads", hf_json["num_key_value_heads"]),
                      ("ffn_dim", hf_json["intermediate_size"])):
        if c["model"][key] != want:
            fail(f"contract config.model.{key} = {c['model'][key]}, the HF config.json says {want}")
    m = d["mapping"]
    expect = {"dp": np, "train_batch_size": 8, "micro_batch": 2, "gradient_accumulation_steps": 8 // 2 // np}
    for k, v in expect.items():
        if m[k] != v:
            fail(f"mapping.{k} = {m[k]}, expected {v}")
    keys = {k["key"]: k for k in m["keys"]}
    for k in ("train_batch_size", "zero_optimization.stage", "bf16.enabled", "scheduler.type",
              "optimizer.params.betas", "gradient_clipping"):
        if keys.get(k, {}).get("kind") != "mapped":
            fail(f"mapping of {k}: {keys.get(k)}")
    for k in ("zero_optimization.overlap_comm", "steps_per_print", "wall_clock_breakdown"):
        if keys.get(k, {}).get("kind") != "no_effect":
            fail(f"mapping of {k}: {keys.get(k)}")
    checks = {("parallel", "zero"): 2, ("parallel", "dp"): np, ("train", "precision"): "bf16",
              ("train", "lr_schedule"): "warmup_decay_lr", ("train", "global_batch"): 8,
              ("train", "micro_batch_size"): 2, ("train", "lr"): 3e-3, ("train", "warmup_min_lr"): 3e-4,
              ("train", "warmup_steps"): 3, ("train", "schedule_steps"): 30, ("train", "warmup_type"): "linear",
              ("train", "beta2"): 0.95, ("train", "grad_clip"): 1.0, ("train", "weight_decay"): 0.1}
    for (sec, key), want in checks.items():
        if c[sec][key] != want:
            fail(f"contract config.{sec}.{key} = {c[sec][key]}, expected {want}")
    # The learning rate the run used: WarmupDecayLR stepped as DeepSpeed steps it (docs/deepspeed.md).
    metrics = [json.loads(l) for l in open(os.path.join(out, "reference", "metrics.jsonl")) if '"lr"' in l]
    lrs = [r["lr"] for r in metrics if r.get("step") is not None and "loss" in r]
    n, lo, hi, total = 3, 3e-4, 3e-3, 30
    def ds_lr(i):
        g = i / n if i < n else max(0.0, (total - i) / max(1.0, total - n))
        return lo + (hi - lo) * g
    want = [lo] + [ds_lr(s - 1) for s in range(1, len(lrs))]
    if not lrs or any(abs(a - b) > 1e-12 * max(1.0, abs(b)) for a, b in zip(lrs, want)):
        fail(f"reference lr per step {lrs} != WarmupDecayLR {want}")
    print(f"PASS: prove --np {np} with the ds_config; lr per step {lrs}")


def cli(args):
    ds = os.path.join(args.source, "examples", "deepspeed", "ds_config.json")
    p = run([args.bin, "config", "show", "--preset", "tiny", "--deepspeed", ds, "--np", "2", "--set", "train.lr=1e-3",
             "--json"])
    if p.returncode != 0:
        fail(f"config show exited {p.returncode}: {p.stderr}")
    j = json.loads(p.stdout)
    if j["config"]["train"]["lr"] != 1e-3 or j["config"]["parallel"]["zero"] != 2 or j["config"]["parallel"]["dp"] != 2:
        fail(f"config show: --set train.lr must win, zero 2 and dp 2 from the ds_config and --np: {j['config']}")
    outcomes = {k["key"]: k["outcome"] for k in j["deepspeed"]["mapping"]["keys"]}
    if outcomes.get("scheduler.params.warmup_max_lr") != "train.lr = 0.003":
        fail(f"config show: the mapping of warmup_max_lr: {outcomes.get('scheduler.params.warmup_max_lr')}")
    p = run([args.bin, "config", "show", "--preset", "tiny", "--deepspeed", ds, "--np", "2", "--set", "train.lr=1e-3"])
    if p.returncode != 0 or "scheduler.params.warmup_max_lr" not in p.stdout or \
            "train.lr = 0.003, then --set: train.lr = 0.001" not in p.stdout:
        fail(f"config show must say that --set replaced the mapped train.lr:\n{p.stdout[-3000:]}")
    p = run([args.bin, "plan", "--cluster", "dgx-a100", "--model", "tiny", "--deepspeed", ds, "--dp", "4", "--tp", "2",
             "--json"])
    if p.returncode != 0:
        fail(f"plan --deepspeed exited {p.returncode}: {p.stderr}")
    inputs = json.loads(p.stdout)["inputs"]
    if inputs["strategy"]["zero"] != 2 or inputs["global_batch"] != 8 or inputs["strategy"]["micro_batch_size"] != 2:
        fail(f"plan --deepspeed: {inputs['strategy']}, global_batch {inputs['global_batch']}")
    out = os.path.join(args.work, "compare")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [args.bin, "compare", "--preset", "tiny", "--deepspeed", ds, "--strategies", "zero2-dp2", "--out", out]
    for s in SMALL:
        cmd += ["--set", s]
    p = run(cmd)
    print(p.stdout[-3000:])
    if p.returncode != 0:
        fail(f"compare --deepspeed exited {p.returncode}: {p.stderr[-3000:]}")
    out = os.path.join(args.work, "train_np2")
    shutil.rmtree(out, ignore_errors=True)
    cmd = T.mpirun(2) + [args.bin, "train",
           "--preset", "tiny", "--deepspeed", ds, "--out", out, "--quiet"] + sum((["--set", s] for s in SMALL), [])
    p = run(cmd)
    if p.returncode != 0:
        fail(f"train --deepspeed under mpirun -np 2 exited {p.returncode}: {p.stderr[-3000:]}")
    c = json.load(open(os.path.join(out, "contract.json")))["config"]
    if c["parallel"]["dp"] != 2 or c["deepspeed"]["mapping"]["gradient_accumulation_steps"] != 2:
        fail(f"train under mpirun -np 2: dp {c['parallel']['dp']}, mapping {c['deepspeed']['mapping']}")
    print("PASS: config show, plan, compare and train take the ds_config")


def bad_input(args):
    cases = {
        "malformed": ('{"train_batch_size": 8,, }', "not valid JSON"),
        "wrong_type": ('{"train_batch_size": "8"}', "train_batch_size = \"8\" must be an integer"),
        "batch": ('{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}',
                  "8 != 2 * 4 * 2"),
        "offload": ('{"train_batch_size": 8, "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}}}',
                    "zero_optimization.offload_optimizer: refused"),
        "unknown": ('{"train_batch_size": 8, "fp16": {"enabled": false, "loss_scael": 0}}', "unknown key fp16.loss_scael"),
    }
    os.makedirs(args.work, exist_ok=True)
    for name, (text, needle) in cases.items():
        path = os.path.join(args.work, f"bad_{name}.json")
        open(path, "w").write(text)
        out = os.path.join(args.work, f"bad_{name}_out")
        shutil.rmtree(out, ignore_errors=True)
        cmd = T.mpirun(2) + [args.bin, "train",
               "--preset", "tiny", "--deepspeed", path, "--out", out, "--quiet"]
        p = run(cmd, timeout=300)
        text = p.stdout + p.stderr
        errors = [l for l in text.splitlines() if "error:" in l]
        print(name, p.returncode, errors)
        if p.returncode != 2:
            fail(f"{name}: exit {p.returncode}, expected 2\n{p.stderr[-2000:]}")
        # One message per rank (its first line holds "error:"; a list of problems follows it), naming the key.
        if len(errors) != 2 or text.count(needle) != 2:
            fail(f"{name}: expected one error per rank naming '{needle}', got {errors}\n{text[-3000:]}")
        if len(set(e.split("error:", 1)[1] for e in errors)) != 1:
            fail(f"{name}: the ranks' messages differ: {errors}")
        if os.path.exists(out) and os.listdir(out):
            fail(f"{name}: --out was written: {os.listdir(out)}")
    print("PASS: every bad ds_config exits 2 on both ranks with the same message, nothing written")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.case == "prove_np2":
        prove(args, 2)
    elif args.case == "prove_np4":
        prove(args, 4)
    elif args.case == "cli":
        cli(args)
    elif args.case == "bad_input":
        bad_input(args)
    else:
        fail(f"unknown case {args.case}")


if __name__ == "__main__":
    main()
