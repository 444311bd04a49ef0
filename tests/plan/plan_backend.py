"""The planner prices a run with the rates of the GEMM backend the run executed (issue 49; docs/plan.md §9, §10;
planner/evaluate_backends.h). Not timed: it checks names, never a figure.

  calibrate  `plan calibrate --quick --gemm32 openblas` and `--gemm32 onednn` each record the fp32 backend they
             measured in the cluster file ([device.measured.gemm_backend] fp32, as a contract's engine.gemm32 names
             it: library-version/core-or-ISA) and the 16-bit one (bf16, as engine.gemm16). A one-step tiny run on each
             pinned backend and one on the host's pick (train.gemm32 = "auto") are planned with `plan --run`: each
             against the calibration of its own backend is planned (exit 0), against the other one refused with
             exit 2 naming the run's backend, the cluster's, engine.gemm32, gemm_backend.fp32 and the calibration to
             run as the hint. --efficiency (no measured rate priced) plans it anyway. A cluster written before the
             backends had full names ("openblas sgemm, 1 thread") is compared by library: it plans the OpenBLAS run
             and refuses the oneDNN one.
  bf16       (after `calibrate`, whose files and runs it reuses) a bf16 run against a calibration whose bf16 backend is edited to the widening fallback: refused naming
             engine.gemm16 and gemm_backend.bf16 (skipped where the CPU has no native bf16 GEMM).

usage: plan_backend.py CASE --bin shardproof --work DIR
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

ARGS = None
TINY = ["--preset", "tiny", "--set", "train.steps=1", "--set", "train.eval_batches=0", "--set", "train.eval_every=0",
        "--quiet"]


def calibrated(backend):
    """A quick calibration on `backend` (cached in --work across cases); its file's text."""
    path = os.path.join(ARGS.work, f"cluster-{backend}.toml")
    if not os.path.exists(path):
        T.run_ok([ARGS.bin, "plan", "calibrate", "--np", "2", "--quick", "--gemm32", backend, "--out", path])
    with open(path) as f:
        return path, f.read()


def measured_backend(text, dtype):
    m = re.search(rf'^{dtype} = "(.*)"$', text, re.M)
    return m.group(1) if m else None


def trained(name, sets):
    out = os.path.join(ARGS.work, name)
    if not os.path.exists(os.path.join(out, "contract.json")):
        T.fresh(out)
        T.run_ok([ARGS.bin, "train", "--out", out] + TINY + T.sets(sets))
    return out, T.read_json(os.path.join(out, "contract.json"))


def plan(cluster, run, *extra):
    return T.run([ARGS.bin, "plan", "--cluster", cluster, "--run", run, "--json"] + list(extra))


def case_calibrate():
    T.fresh(ARGS.work, create=True)  # nothing from an earlier build: its calibrations and runs are measured anew
    files = {b: calibrated(b) for b in ("openblas", "onednn")}
    for b, (path, text) in files.items():
        fp32 = measured_backend(text, "fp32")
        T.check(fp32 and re.fullmatch(rf"{b}-[0-9.]+/\S+", fp32), f"{path}: gemm_backend fp32 = {fp32}")
        print(f"{b}: calibrated fp32 on {fp32}, bf16 on {measured_backend(text, 'bf16')}")
    runs = {b: trained(f"run-{b}", [f"train.gemm32={b}"]) for b in ("openblas", "onednn")}
    runs["auto"] = trained("run-auto", [])
    for name, (run, contract) in runs.items():
        ran = contract["engine"]["gemm32"]
        lib = contract["config"]["train"]["gemm32"]
        T.check(lib in ("openblas", "onednn") and ran.startswith(lib + "-"),
                f"{name}: contract train.gemm32 = {lib}, engine.gemm32 = {ran}")
        if name != "auto":
            T.check(lib == name, f"a run pinned to {name} resolved to {lib}")
        for b, (path, text) in files.items():
            p = plan(path, run)
            if b == lib:
                T.check(p.returncode == 0, f"{name} run on its own calibration: exit {p.returncode}\n{p.stderr}")
                continue
            err = p.stderr
            T.check(p.returncode == 2, f"{name} run ({ran}) on the {b} calibration: exit {p.returncode}, expected 2")
            for part in (ran, measured_backend(text, "fp32"), "engine.gemm32", "gemm_backend.fp32",
                         f"plan calibrate --gemm32 {lib}"):
                T.check(part in err, f"the refusal does not name {part!r}:\n{err}")
            e = plan(path, run, "--efficiency", "0.5")
            T.check(e.returncode == 0, f"--efficiency prices no measured rate, so it plans any run: exit {e.returncode}")
        print(f"{name} run ({ran}): planned on its calibration, refused on the other")
    # A cluster file from before the full names: compared by library.
    path, text = files["openblas"]
    old = os.path.join(ARGS.work, "cluster-old-label.toml")
    with open(old, "w") as f:
        f.write(re.sub(r'^fp32 = ".*"$', 'fp32 = "openblas sgemm, 1 thread"', text, flags=re.M))
    T.check(plan(old, runs["openblas"][0]).returncode == 0, "an OpenBLAS run on an old-label OpenBLAS calibration")
    T.check(plan(old, runs["onednn"][0]).returncode == 2, "a oneDNN run on an old-label OpenBLAS calibration")


def case_bf16():
    path, text = calibrated("openblas")
    bf16 = measured_backend(text, "bf16")
    if not bf16 or not bf16.startswith("onednn-"):
        print(f"skipped: the calibration's bf16 GEMM is {bf16}, not oneDNN's native one")
        return
    run, contract = trained("run-bf16", ["train.precision=bf16", "train.gemm32=openblas"])
    T.check(contract["engine"].get("gemm16") == bf16, f"engine.gemm16 {contract['engine'].get('gemm16')} vs {bf16}")
    T.check(plan(path, run).returncode == 0, "a bf16 run on its calibration")
    edited = os.path.join(ARGS.work, "cluster-bf16-fallback.toml")
    with open(edited, "w") as f:
        f.write(re.sub(r'^bf16 = ".*"$', 'bf16 = "fallback-sgemm"', text, flags=re.M))
    p = plan(edited, run)
    T.check(p.returncode == 2, f"a bf16 run on a calibration of the fallback: exit {p.returncode}")
    for part in (bf16, "fallback-sgemm", "engine.gemm16", "gemm_backend.bf16"):
        T.check(part in p.stderr, f"the refusal does not name {part!r}:\n{p.stderr}")


def keep(args):
    global ARGS
    ARGS = args


if __name__ == "__main__":
    T.drive({"calibrate": case_calibrate, "bf16": case_bf16}, keep)
