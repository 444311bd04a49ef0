"""Oracle tests: shardproof against an independent PyTorch implementation (llama_torch.py).

  grads:      `shardproof grads` loss and every named gradient vs PyTorch in float64, for several
              configurations (GQA, MHA with tied embeddings, odd sizes with an ignored target, a
              tiny-preset-sized model). Criterion (issue 2): |a - b| <= 1e-6 + 1e-5 * |ref| per element.
  trajectory: 10 AdamW steps (warmup + cosine, clipping, weight decay, 2 micro-batches per step) from
              the same weights on the same batches. Criterion, derived rather than tuned: shardproof's
              fp32 trajectory may deviate from the float64 truth by at most 3x what PyTorch's own fp32
              trajectory deviates, plus 1e-6 (losses and final weights) -- i.e. no worse than fp32
              arithmetic itself (docs/equivalence.md).
Exit status is the verdict. Usage: test_oracle.py {grads|trajectory} --bin shardproof --driver trajectory_driver
"""
import argparse
import json
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import llama_torch as L  # noqa: E402
import sp_test as T  # noqa: E402

CONFIGS = {
    "gqa": dict(vocab_size=61, dim=24, n_layers=2, n_heads=6, n_kv_heads=2, ffn_dim=40, max_seq=16, B=3, T=7),
    "mha_tied": dict(vocab_size=50, dim=32, n_layers=1, n_heads=4, n_kv_heads=4, ffn_dim=44, max_seq=16, B=2, T=9,
                     tie_embeddings=True),
    "odd_ignored": dict(vocab_size=37, dim=18, n_layers=3, n_heads=3, n_kv_heads=1, ffn_dim=27, max_seq=8, B=1, T=5,
                        ignore=True),
    "tiny_shape": dict(vocab_size=2048, dim=256, n_layers=2, n_heads=8, n_kv_heads=4, ffn_dim=688, max_seq=64, B=2,
                       T=64),
}


def model_cfg(c):
    return {k: v for k, v in c.items() if k not in ("B", "T", "ignore")}


def compare(name, got, ref, atol=1e-6, rtol=1e-5):
    got, ref = got.double(), ref.double()
    excess = ((got - ref).abs() - (atol + rtol * ref.abs())).max().item()
    err = (got - ref).abs().max().item()
    return excess <= 0, err


def test_grads(args, tmp):
    failures = 0
    for key, c in CONFIGS.items():
        cfg = model_cfg(c)
        g = torch.Generator().manual_seed(7)
        tokens = torch.randint(0, c["vocab_size"], (c["B"], c["T"] + 1), generator=g)
        if c.get("ignore"):
            tokens[0, 3] = -1
        w = L.random_weights(cfg, seed=11)
        wp, tp, cp, gp = (os.path.join(tmp, f"{key}.{s}") for s in ("w.safetensors", "tok.bin", "cfg.json", "g.safetensors"))
        L.write_safetensors(wp, w)
        L.write_token_batch(tp, tokens.numpy())
        json.dump(cfg, open(cp, "w"))
        T.run_ok([args.bin, "grads", "--config", cp, "--weights", wp, "--tokens", tp, "--out", gp])
        grads, meta = L.read_safetensors(gp)
        ref_loss, ref_grads = L.loss_and_grads(cfg, w, tokens, torch.float64)
        loss = float(meta["loss"])
        ok_loss = abs(loss - ref_loss) <= 1e-6 + 1e-5 * abs(ref_loss)
        print(f"[{key}] loss shardproof {loss:.9f} torch(f64) {ref_loss:.9f} {'ok' if ok_loss else 'MISMATCH'}")
        failures += not ok_loss
        if set(grads) != set(ref_grads):
            print(f"[{key}] tensor names differ: {sorted(set(grads) ^ set(ref_grads))}")
            failures += 1
            continue
        worst = 0.0
        for name in ref_grads:
            ok, err = compare(name, grads[name], ref_grads[name])
            worst = max(worst, err)
            if not ok:
                print(f"[{key}] gradient {name}: max |diff| {err:.3g} exceeds 1e-6 + 1e-5*|ref|")
                failures += 1
        print(f"[{key}] {len(ref_grads)} gradients, max |diff| {worst:.3g}")
    return failures


def test_trajectory(args, tmp):
    c = CONFIGS["gqa"]
    cfg = model_cfg(c)
    tr = dict(steps=10, global_batch=4, micro_batch_size=2, seq_len=c["T"], lr=1e-2, min_lr=1e-3, warmup_steps=2,
              weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0)
    g = torch.Generator().manual_seed(3)
    batches = torch.randint(0, c["vocab_size"], (tr["steps"] * tr["global_batch"], c["T"] + 1), generator=g)
    w = L.random_weights(cfg, seed=5)
    wp, bp, jp, op, fp = (os.path.join(tmp, s) for s in ("w.safetensors", "b.bin", "job.json", "out.json", "f.safetensors"))
    L.write_safetensors(wp, w)
    L.write_token_batch(bp, batches.numpy())
    json.dump({"model": cfg, "train": tr, "weights": wp, "batches": bp, "out": op, "final_weights": fp}, open(jp, "w"))
    T.run_ok([args.driver, jp])
    ours = T.read_json(op)
    final, _ = L.read_safetensors(fp)
    l32, n32, w32 = L.train(cfg, tr, w, batches, torch.float32)
    l64, n64, w64 = L.train(cfg, tr, w, batches, torch.float64)
    failures = 0
    for s in range(tr["steps"]):
        dev_ours, dev_torch = abs(ours["loss"][s] - l64[s]), abs(l32[s] - l64[s])
        ok = dev_ours <= 3 * dev_torch + 1e-6
        failures += not ok
        print(f"step {s}: loss shardproof {ours['loss'][s]:.8f} torch32 {l32[s]:.8f} torch64 {l64[s]:.8f} "
              f"|ours-64| {dev_ours:.2e} |t32-64| {dev_torch:.2e} {'ok' if ok else 'MISMATCH'}")
    for name in w64:
        dev_ours = (final[name].double() - w64[name]).abs().max().item()
        dev_torch = (w32[name].double() - w64[name]).abs().max().item()
        if dev_ours > 3 * dev_torch + 1e-6:
            print(f"final weight {name}: |ours-64| {dev_ours:.3g} > 3*|t32-64| {dev_torch:.3g} + 1e-6")
            failures += 1
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["grads", "trajectory"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--driver", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        failures = test_grads(args, tmp) if args.part == "grads" else test_trajectory(args, tmp)
    print("FAIL" if failures else "PASS", f"({failures} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
