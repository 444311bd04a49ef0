"""Oracle tests: shardproof against an independent PyTorch implementation (llama_torch.py).

  grads:      `shardproof grads` loss and every named gradient vs PyTorch in float64, for several
              configurations (GQA, MHA with tied embeddings, odd sizes with an ignored target, a
              tiny-preset-sized model). Criterion (issue 2): |a - b| <= 1e-6 + 1e-5 * |ref| per element.
  mixed:      bf16 and fp16 (model/llama_stage16.cc through stage16_driver, every 16-bit GEMM backend this
              CPU offers; fp16 with a loss scale) against PyTorch rounding to 16 bits exactly where the engine
              does (llama_torch.loss_and_grads_mixed) in float64. Criterion per gradient and for the loss
              (test_mixed, derived in docs/equivalence.md): within the 16-bit envelope 2*sqrt(R)*u/sqrt(3), and
              float64 plus fp32 arithmetic plus a few flips of 16-bit roundings that fp32 could flip (flips.py);
              the weights' rounding equals torch's bit for bit.
  mixed_trajectory: 10 AdamW steps in bf16 (bf16 and fp32 gradients) and fp16 (fp16 gradients, dynamic loss
              scaling) against PyTorch's mixed-precision recipe (llama_torch.train_mixed), 4 seeds; criterion in
              test_mixed_trajectory (no worse than PyTorch's own fp32 computation of the recipe, 3x; the scaler's
              scales and skips exact).
  trajectory: 10 AdamW steps (warmup + cosine, clipping, weight decay, 2 micro-batches per step) from
              the same weights on the same batches. Criterion, derived rather than tuned: shardproof's
              fp32 trajectory may deviate from the float64 truth by at most 3x what PyTorch's own fp32
              trajectory deviates, plus 1e-6 (losses and final weights) -- i.e. no worse than fp32
              arithmetic itself (docs/equivalence.md).
Exit status is the verdict. Usage: test_oracle.py {grads|trajectory|mixed|mixed_trajectory} --bin shardproof
--driver DRIVER (trajectory_driver for trajectory and mixed_trajectory, stage16_driver for mixed).
"""
import argparse
import json
import math
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import flips  # noqa: E402
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


# Mixed-precision trajectories (issue 31): bf16 with bf16 and with fp32 gradients, fp16 with fp16 gradients and
# dynamic loss scaling (a window of 3 so that the scale grows within the run, from 2^18 so that steps overflow).
MIXED_RUNS = {
    "bf16_bf16grads": dict(precision="bf16", grad_dtype="bf16", fp16=None),
    "bf16_fp32grads": dict(precision="bf16", grad_dtype="fp32", fp16=None),
    "fp16_fp16grads": dict(precision="fp16", grad_dtype="fp16",
                           fp16=dict(initial_scale_power=18, loss_scale_window=3, hysteresis=2,
                                     consecutive_hysteresis=False, min_loss_scale=1.0)),
}
TRAJECTORY_SEEDS = (3, 4, 5, 6)


def trajectory_distances(ours, final, t, w, t64, w64):
    """(final masters' relative L2 distance, RMS relative loss distance, RMS relative grad-norm distance over the
    steps applied) of a trajectory (t, w) to the float64 recipe (t64, w64)."""
    num = sum(float(((w[n].double() - w64[n]) ** 2).sum()) for n in w64)
    den = sum(float((w64[n] ** 2).sum()) for n in w64)
    rms = lambda v: math.sqrt(sum(x * x for x in v) / max(1, len(v)))  # noqa: E731
    loss = [abs(a - b) / abs(b) for a, b in zip(t["loss"], t64["loss"])]
    norm = [abs(a - b) / abs(b) for a, b, skip in zip(t["grad_norm"], t64["grad_norm"], t64["skipped"]) if not skip]
    return math.sqrt(num / den), rms(loss), rms(norm)


def test_mixed_trajectory(args, tmp):
    """10 AdamW steps in bf16 and in fp16 (16-bit gradients; fp16 with dynamic loss scaling) against PyTorch's
    mixed-precision recipe (llama_torch.train_mixed: fp32 masters, the engine's 16-bit casts, the scaler) from the
    same weights on the same batches, for 4 seeds. A trajectory with 16-bit rounding points is chaotic: a value
    that fp32 arithmetic moves across a 16-bit rounding boundary flips, and training amplifies it, so any two
    correct implementations of the recipe (shardproof's, and PyTorch's own fp32 computation of it) deviate from
    the recipe computed in float64 by distances of one distribution. Criterion, per run: summed over the seeds,
    shardproof's distance (final masters' relative L2, RMS relative loss, RMS relative grad norm) is at most 3x
    PyTorch fp32's, + 2^-24; and the loss scale and skipped steps equal the recipe's exactly at every step. A
    16-bit optimizer bug (masters kept in 16 bits: measured 17-2285x; the scale left in the norm) leaves it."""
    c = CONFIGS["gqa"]
    cfg = model_cfg(c)
    tr = dict(steps=10, global_batch=4, micro_batch_size=2, seq_len=c["T"], lr=1e-2, min_lr=1e-3, warmup_steps=2,
              weight_decay=0.1, beta1=0.9, beta2=0.95, eps=1e-8, grad_clip=1.0)
    failures = 0
    floor = 2.0 ** -24
    for key, run in MIXED_RUNS.items():
        half, gh = HALF[run["precision"]], HALF.get(run["grad_dtype"])
        sums = {"ours": [0.0, 0.0, 0.0], "t32": [0.0, 0.0, 0.0]}
        for seed in TRAJECTORY_SEEDS:
            g = torch.Generator().manual_seed(seed)
            batches = torch.randint(0, c["vocab_size"], (tr["steps"] * tr["global_batch"], c["T"] + 1), generator=g)
            w = L.random_weights(cfg, seed=seed + 2)
            wp, bp, jp, op, fp = (os.path.join(tmp, f"{key}.{seed}.{s}")
                                  for s in ("w.safetensors", "b.bin", "job.json", "out.json", "f.safetensors"))
            L.write_safetensors(wp, w)
            L.write_token_batch(bp, batches.numpy())
            job = {"model": cfg, "train": dict(tr, precision=run["precision"], grad_dtype=run["grad_dtype"]),
                   "weights": wp, "batches": bp, "out": op, "final_weights": fp}
            if run["fp16"]:
                job["fp16"] = run["fp16"]
            json.dump(job, open(jp, "w"))
            T.run_ok([args.driver, jp])
            ours = T.read_json(op)
            final, _ = L.read_safetensors(fp)
            t64, w64 = L.train_mixed(cfg, tr, w, batches, half, gh, torch.float64, run["fp16"])
            t32, w32 = L.train_mixed(cfg, tr, w, batches, half, gh, torch.float32, run["fp16"])
            for field in ("loss_scale", "skipped"):
                if not (ours[field] == t64[field] == t32[field]):
                    print(f"[{key} seed {seed}] {field}: shardproof {ours[field]}, recipe {t64[field]} "
                          f"(float32: {t32[field]})")
                    failures += 1
            d_ours = trajectory_distances(ours, final, ours, final, t64, w64)
            d_t32 = trajectory_distances(t32, w32, t32, w32, t64, w64)
            exact16 = sum(int((final[n].to(half).float() == final[n]).sum()) for n in w64) / sum(
                final[n].numel() for n in w64)
            for i in range(3):
                sums["ours"][i] += d_ours[i]
                sums["t32"][i] += d_t32[i]
            print(f"[{key} seed {seed}] scales {sorted(set(ours['loss_scale']))}, {sum(ours['skipped'])} skipped; "
                  f"masters {d_ours[0]:.3g} (torch32 {d_t32[0]:.3g}), loss {d_ours[1]:.3g} ({d_t32[1]:.3g}), "
                  f"grad norm {d_ours[2]:.3g} ({d_t32[2]:.3g}); masters exactly 16-bit: {exact16:.1%}")
        for i, what in enumerate(("final masters (rel. L2)", "loss (RMS rel.)", "grad norm (RMS rel.)")):
            ok = sums["ours"][i] <= 3 * sums["t32"][i] + floor
            failures += not ok
            print(f"[{key}] {what} over {len(TRAJECTORY_SEEDS)} seeds: shardproof {sums['ours'][i]:.3g}, torch fp32 "
                  f"{sums['t32'][i]:.3g} (ratio {sums['ours'][i] / max(sums['t32'][i], floor):.2f}) "
                  f"{'ok' if ok else 'MISMATCH: more than 3x'}")
    return failures


MIXED_CONFIGS = dict(CONFIGS)
MIXED_CONFIGS["blocks"] = dict(vocab_size=97, dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=96, max_seq=80,
                               B=2, T=80)  # crosses the attention kernels' 64-row blocks
HALF = {"bf16": torch.bfloat16, "fp16": torch.float16}
UNIT16 = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}  # unit roundoff 2^-p of the 16-bit formats (p = 8, 11)
LOSS_SCALE = {"bf16": 1.0, "fp16": 1024.0}       # fp16 runs with a loss scale, as fp16 training does


def mixed_envelope(cfg, precision):
    """tau_16 = 2*sqrt(R)*u/sqrt(3) (docs/equivalence.md): a value rounded to 16 bits moves by a relative
    error uniform in +-u (RMS u/sqrt(3)); a gradient's path crosses R = 13 rounding points per layer + 4 in the
    head (xf, the logits, dlogits, the weights); independent errors add in quadrature; x2 margin.
    This bounds how far two computations with the same casts can drift apart, whatever their arithmetic between
    the casts."""
    R = 13 * cfg["n_layers"] + 4
    return 2.0 * math.sqrt(R) * UNIT16[precision] / math.sqrt(3.0)


def rel_l2(got, ref):
    got, ref = got.double(), ref.double()
    den = ref.norm().item()
    return (got - ref).norm().item() / den if den > 0 else (got - ref).norm().item()


def test_mixed(args, tmp):
    """Per tensor (and for the loss) with d(x) = relative L2 distance to PyTorch float64 with the engine's casts:
      d(shardproof) <= tau_16   (the 16-bit envelope, mixed_envelope), and
      shardproof = float64 + a few flips + fp32 arithmetic: either d(shardproof) <= 3 * d(torch fp32) + 2^-20
      (within what fp32 arithmetic of the same casts leaves; chaotic configurations, where every fp32
      computation flips many roundings, are far inside it), or the distance is explained by at most
      flips.MAX_FLIPS roundings of the float64 computation that an fp32 computation could flip (those within
      its arithmetic error of a rounding boundary), each one's effect computed exactly, what is left within that
      allowance (flips.explain; docs/equivalence.md section 5). Which fp32 computation flips which rounding
      depends on its summation order (the CPU, the OpenBLAS core): the explanation holds on every one. A
      misplaced or missing cast moves every element and is explained by no handful of flips.
    The head's logits and dlogits are checked elementwise instead and taken from the engine (_Given16)."""
    failures = 0
    worst_by_kind = {}
    floor = 2.0 ** -20
    for key, c in MIXED_CONFIGS.items():
        cfg = model_cfg(c)
        g = torch.Generator().manual_seed(7)
        tokens = torch.randint(0, c["vocab_size"], (c["B"], c["T"] + 1), generator=g)
        if c.get("ignore"):
            tokens[0, 3] = -1
        w = L.random_weights(cfg, seed=11)
        wp, tp, jp = (os.path.join(tmp, f"{key}.{s}") for s in ("w.safetensors", "tok.bin", "job.json"))
        L.write_safetensors(wp, w)
        L.write_token_batch(tp, tokens.numpy())
        runs = [("bf16", "fallback", "fp32"), ("bf16", "auto", "fp32"), ("fp16", "fallback", "fp32")]
        if key == "gqa":
            runs += [("bf16", "auto", "bf16"), ("fp16", "auto", "fp16")]
        seen = set()
        for precision, backend, grad_dtype in runs:
            gp, rp = os.path.join(tmp, f"{key}.g.safetensors"), os.path.join(tmp, f"{key}.r.safetensors")
            scale = LOSS_SCALE[precision]
            json.dump({"model": cfg, "precision": precision, "gemm16": backend, "grad_dtype": grad_dtype,
                       "loss_scale": scale, "weights": wp, "tokens": tp, "out": gp, "rounded_weights": rp},
                      open(jp, "w"))
            T.run_ok([args.driver, jp])
            grads, meta = L.read_safetensors(gp)
            name = meta["gemm16"]
            if (precision, name, grad_dtype) in seen:
                continue  # auto resolved to the fallback on this CPU
            seen.add((precision, name, grad_dtype))
            half = HALF[precision]
            rounded, _ = L.read_safetensors(rp)
            w16 = {k: v.to(half).to(torch.float32) for k, v in w.items()}
            bad_w = [k for k in w16 if not torch.equal(w16[k], rounded[k])]
            if bad_w:
                print(f"[{key} {precision}] weights rounded differently from torch: {bad_w[:3]}")
                failures += 1
            gh = HALF[grad_dtype] if grad_dtype != "fp32" else None
            # The head's 16-bit logits and dlogits: the engine's, checked elementwise (llama_torch._Given16).
            shape = (c["B"], c["T"], c["vocab_size"])
            head = w16["model.embed_tokens.weight" if cfg.get("tie_embeddings") else "lm_head.weight"]
            xf_e, logits_e = grads.pop("engine.xf"), grads.pop("engine.logits")
            stats = {}
            stats["logits_ok"], stats["logits_flips"] = L.logits_within_gemm_bound(xf_e, head, logits_e, half)
            given = {"logits": logits_e.reshape(shape), "dlogits": grads.pop("engine.dlogits").reshape(shape)}
            l64, g64 = L.loss_and_grads_mixed(cfg, w16, tokens, half, gh, scale, torch.float64,
                                              dict(given, stats=stats))
            l32, g32 = L.loss_and_grads_mixed(cfg, w16, tokens, half, gh, scale, torch.float32,
                                              dict(given, stats=None))
            tau = mixed_envelope(c, precision)
            tag = f"[{key} {precision} {name} grad {grad_dtype}]"
            head_ok = stats["logits_ok"] and stats["dlogits_ok"]
            failures += not head_ok
            print(f"{tag} head: 16-bit logits {'within' if stats['logits_ok'] else 'OUTSIDE'} the fp32 GEMM bound "
                  f"({stats['logits_flips']} flips), dlogits {'within' if stats['dlogits_ok'] else 'OUTSIDE'} "
                  f"the cross-entropy's bound ({stats['dlogits_flips']} flips) of float64's rounding")
            loss = float(meta["loss"])
            d_ours, d_t32 = abs(loss - l64) / abs(l64), abs(l32 - l64) / abs(l64)
            # allowed: what fp32 arithmetic may leave (3x PyTorch's fp32 of the same casts, and the loss's floor);
            # beyond it, the distance must be a few flips of the float64 computation's roundings (flips.py).
            allowed = {"loss": 3 * d_t32 + floor}
            outside = [] if d_ours <= allowed["loss"] else ["loss"]
            ok = d_ours <= tau
            failures += not ok
            print(f"{tag} loss {loss:.9f} torch64 {l64:.9f} d(ours) {d_ours:.2e} d(torch32) {d_t32:.2e} "
                  f"tau_16 {tau:.2e} {'ok' if ok else 'MISMATCH'}")
            worst, worst_t32 = 0.0, 0.0
            for n in g64:
                d_ours, d_t32 = rel_l2(grads[n], g64[n]), rel_l2(g32[n], g64[n])
                kind = n.split(".")[-2] if n.count(".") >= 2 else n
                wk = worst_by_kind.setdefault((precision, kind), (0.0, 0.0))
                worst_by_kind[(precision, kind)] = (max(wk[0], d_ours), max(wk[1], d_t32))
                worst, worst_t32 = max(worst, d_ours), max(worst_t32, d_t32)
                allowed[n] = 3 * d_t32 + floor
                if d_ours > allowed[n]:
                    outside.append(n)
                if d_ours > tau:
                    print(f"{tag} gradient {n}: d(ours) {d_ours:.3g} outside the 16-bit envelope tau_16 {tau:.3g}")
                    failures += 1
            if outside:
                explained, why = flips.explain(
                    lambda: L.loss_and_grads_mixed(cfg, w16, tokens, half, gh, scale, torch.float64,
                                                   dict(given, stats=None)),
                    l64, g64, loss, grads, allowed, flips.longest_sum(c))
                print(f"{tag} {len(outside)} tensor(s) beyond fp32 arithmetic (first: {outside[0]}): "
                      f"{'explained' if explained else 'NOT explained'} by {why}")
                failures += not explained
            print(f"{tag} {len(g64)} gradients: worst d(ours) {worst:.3g}, worst d(torch32) {worst_t32:.3g}, "
                  f"tau_16 {tau:.3g}")
    print("worst relative L2 distance to torch float64 per tensor kind: shardproof / torch float32")
    for (precision, kind), (r, t) in sorted(worst_by_kind.items()):
        print(f"  {precision} {kind}: {r:.3g} / {t:.3g}")
    return failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("part", choices=["grads", "trajectory", "mixed", "mixed_trajectory"])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--driver", required=True)
    args = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        part = {"grads": test_grads, "trajectory": test_trajectory, "mixed": test_mixed,
                "mixed_trajectory": test_mixed_trajectory}[args.part]
        failures = part(args, tmp)
    print("FAIL" if failures else "PASS", f"({failures} failures)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
