"""fp16 with torch's GradScaler (issue 44): transformers' LlamaForCausalLM under torch.autocast("cpu",
dtype=torch.float16) with DDP on gloo and a GradScaler (examples/hf_ddp --autocast fp16), recorded by
Recorder.attach(..., autocast=torch.float16, grad_scaler=scaler) and judged: the gradients against the engine's fp16
casts within the fp16 envelope (u = 2^-11, docs/equivalence.md §8), a skipped step's update as no step, and the
scaler's decisions (skip, back-off, growth) against the engine's loss scaler on the recorded overflows. A large
initial scale makes the first step overflow and a growth interval of 2 makes it grow: the PASS covers both. Three
scaler bugs FAIL where they live: opt.step() on an overflowed step (update), a scaler re-created mid-run as a resume
that forgets its state (scaler), clipping before unscale_ (gradients; long). The recorder refuses what it cannot
judge by name (fp16 without its scaler, other growth factors, gradients read before unscale_)."""
import os
import re
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from hf_runs import first_divergence, judge, record, steps_lines  # noqa: E402

GRADIENTS = "gradients equal the engine's single-device gradient at every step"
UPDATE = "update equals the engine's AdamW replay at every step"
SCALER = "scaler: GradScaler's skips and scales follow its rule"
FP16 = ["--autocast", "fp16", "--init-scale", str(2.0 ** 20), "--growth-interval", "2"]


def check_pass(out, steps):
    judged, gate, rows = judge(out)
    assert judged.returncode == 0 and gate["verdict"] == "PASS", judged.stdout + judged.stderr
    m = re.search(r"(\d+) skipped \(overflow\), (\d+) growths", rows[SCALER]["measured"])
    skipped, grown = int(m.group(1)), int(m.group(2))
    assert skipped >= 1 and grown >= 1, rows[SCALER]  # both decisions exercised, and checked
    assert f"{steps - skipped} of {steps} steps × 21 tensors" in rows[GRADIENTS]["measured"], rows[GRADIENTS]
    assert f"{steps} of {steps} steps replayed, {21 * steps} tensors, {21 * steps} bitwise" in rows[UPDATE]["measured"]
    lines = steps_lines(out)
    assert sum(s["overflow"] for s in lines) == skipped
    tol = lines[0]["tolerances"]
    assert tol["rounding_points"] == 66 and abs(tol["grad"] - 2 * 66 ** 0.5 / 2048 / 3 ** 0.5) < 1e-7, tol
    worst = max(r for s in lines if not s["overflow"] for r in s["ratios"]["gradients"].values())
    print(f"{skipped} skipped, {grown} growths; worst gradient ratio to the fp16 envelope: {worst:.3f}")
    assert 1e-3 / tol["grad"] < worst < 1, worst


def check_fail(out, view, pattern):
    judged, gate, rows = judge(out)
    assert judged.returncode == 1 and gate["verdict"] == "FAIL", judged.stdout + judged.stderr
    first = first_divergence(out)
    assert first["view"] == view and pattern in first.get("pattern", ""), first
    return rows, first


def test_fp16_grad_scaler_passes_and_its_bugs_fail(tmp_path):
    check_pass(record(tmp_path, "clean", 6, *FP16), 6)
    # opt.step() where scaler.step(opt) skips: the overflowed step is applied (NaN parameters).
    check_fail(record(tmp_path, "step-anyway", 2, *FP16, "--bug", "fp16-step-anyway"), "update", "")
    # A new scaler at step 3 (a resume that did not load its state): it restarts from init_scale.
    rows, first = check_fail(record(tmp_path, "reset", 4, *FP16, "--bug", "fp16-scaler-reset"), "scaler",
                             "the scaler's state changed between steps")
    assert first["step"] == 3, first
    assert rows[GRADIENTS]["passed"] and rows[UPDATE]["passed"], rows  # only the scaler's row sees it


def test_every_step_skipped_is_unverified(tmp_path):
    """A scale so large that GradScaler skips every step: no gradient was compared, so never PASS (nor FAIL)."""
    judged, gate, rows = judge(record(tmp_path, "all-skipped", 2, *FP16, "--init-scale", str(2.0 ** 40)))
    assert judged.returncode == 3 and "GradScaler skipped every step" in judged.stdout, judged.stdout + judged.stderr
    assert rows[SCALER]["passed"] and "2 skipped (overflow)" in rows[SCALER]["measured"], rows[SCALER]


@pytest.mark.long
def test_clipping_the_scaled_gradients_fails_at_gradients(tmp_path):
    run = record(tmp_path, "clip-scaled", 2, *FP16, "--bug", "fp16-clip-scaled", "--init-scale", "65536")
    rows, first = check_fail(run, "gradients", "× the engine's")
    assert first["step"] == 0, first


@pytest.mark.long
def test_fp16_twenty_steps(tmp_path):
    check_pass(record(tmp_path, "clean20", 20, *FP16), 20)


def test_recorder_refuses_what_it_cannot_judge():
    from shardproof_torch import declared, grad_scaler
    with pytest.raises(declared.Refused, match="without its GradScaler"):
        grad_scaler.contract_of(None, "float16")
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 16)
    with pytest.raises(declared.Refused, match="with fp16 autocast only"):
        grad_scaler.contract_of(scaler, "bfloat16")
    with pytest.raises(declared.Refused, match="growth_factor=3.0"):
        grad_scaler.contract_of(torch.amp.GradScaler("cpu", growth_factor=3.0), "float16")
    with pytest.raises(declared.Refused, match="a power of two"):
        grad_scaler.contract_of(torch.amp.GradScaler("cpu", init_scale=1000.0), "float16")
    assert grad_scaler.contract_of(scaler, "float16") == {"init_scale": 65536.0, "growth_factor": 2.0,
                                                          "backoff_factor": 0.5, "growth_interval": 2000}
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.AdamW(model.parameters())
    scaler.scale(model(torch.ones(2, 4)).sum()).backward()
    with pytest.raises(declared.Refused, match=r"call scaler.unscale_\(optimizer\) before rec.gradients\(\)"):
        grad_scaler.after_unscale(scaler, "step 0")
    scaler.unscale_(opt)
    seen = grad_scaler.after_unscale(scaler, "step 0")
    assert seen == {"scale": 65536.0, "growth_tracker": 0, "found_inf": False}, seen
    scaler.step(opt)
    scaler.update()
    assert grad_scaler.after_update(scaler, seen)["next_growth_tracker"] == 1
