"""A run must never lose or mix its evidence, crash on bad input or hang (issue 20, items 6-11 and its
messages), end to end through `shardproof train` / `grads` / `ckpt` with real MPI ranks:

  disk_full       the evidence files' disk fills mid-run (an 8 MB tmpfs when it can be mounted, and a
                  file size limit, RLIMIT_FSIZE, always): train fails naming the file(s), every JSONL
                  line is whole, a committed checkpoint survives and verifies, no checkpoint is
                  committed over incomplete evidence
  out_dir         a finished run is refused (exit 2, untouched), --overwrite clears it, a 1-rank run
                  after a 2-rank one leaves no rank-1 file, foreign files and a sealed proof bundle are
                  refused (also with --overwrite and from inside it), a second run into a running one
                  fails at once naming the holder's pid, a directory with checkpoints resumes
  launcher_kill   SIGTERM / SIGKILL of the `train --np 2` launcher: no rank process remains
  frozen_rank     SIGSTOP of one rank under mpirun: the watchdog ends the job naming that rank
  huge_steps      train.steps = 10^12: the first step comes at once, comm_predicted.json stays small,
                  and the trace equals the prediction
  bad_inputs      grads: token batch headers 2^31 and 2^32-1, an all-padding batch, NaN weights;
                  train: an eval split with 0 tokens
  fp16_scaler     fp16: the loss scaler's records in checksums.jsonl, compared exactly (a forced overflow
                  is the first divergence, at its step, on the scaler record)
  messages        "shardproof: error:" prefixes, --np 0, a missing --config, a model too big for the
                  machine, hints naming only the command's own flags, LATEST naming a missing step,
                  the summary line without an evaluation and after a resume
Each case takes a few seconds on 2 cores. Usage: runs_test.py CASE --bin shardproof --work DIR
"""
import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import signal
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402
from sp_test import Failure, check, fresh, mpirun  # noqa: E402

MODEL = ["--preset", "tiny",
         "--set", "model.dim=64", "--set", "model.n_heads=4", "--set", "model.n_kv_heads=2",
         "--set", "model.ffn_dim=128", "--set", "model.max_seq=32", "--set", "train.seq_len=32"]
SMALL = MODEL + ["--quiet", "--set", "train.steps=4", "--set", "train.eval_every=0", "--set", "train.eval_batches=2"]
ARGS = None


def work(*parts):
    return os.path.join(ARGS.work, *parts)


def run(args, ranks=1, timeout=180, **kw):
    return T.run(T.launch(ARGS.bin, ranks) + list(args), timeout=timeout, **kw)


def train(out, *extra, ranks=1, sets=(), timeout=180, **kw):
    args = ["train", "--out", out] + SMALL + list(extra)
    for s in sets:
        args += ["--set", s]
    if ranks > 1:
        args += ["--set", f"parallel.dp={ranks}"]
    return run(args, ranks=ranks, timeout=timeout, **kw)


def expect(p, code, *patterns):
    text = p.stdout + p.stderr
    check(p.returncode == code, f"exit {p.returncode}, expected {code}:\n{text[-3000:]}")
    for pat in patterns:
        check(re.search(pat, text), f"output lacks /{pat}/:\n{text[-3000:]}")


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def whole_lines(path):
    data = open(path, "rb").read()
    check(data.endswith(b"\n") or not data, f"{path} ends in half a record: {data[-80:]!r}")
    for n, line in enumerate(data.splitlines(), 1):
        try:
            json.loads(line)
        except ValueError:
            raise Failure(f"{path}:{n} is not a whole JSON record: {line[:80]!r}")
    return data.count(b"\n")


def pids_of(run_dir, timeout=60):
    t0 = time.time()
    path = os.path.join(run_dir, "topology.json")
    while time.time() - t0 < timeout:
        try:
            return [r["pid"] for r in json.load(open(path))["ranks"]]
        except (OSError, ValueError):
            time.sleep(0.1)
    raise Failure(f"{path} never appeared")


def alive(pid):
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ------------------------------------------------------------------------------------------- cases

def case_disk_full():
    # 1. A file size limit (no root needed): every write past 300 kB fails with EFBIG.
    out = fresh(work("fsize", "run"))
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, resource.RLIM_INFINITY))
    train(work("fsize", "warm"), "--overwrite")  # the prepared-data cache exists before the limit applies
    # (PMIx's shared-memory store would hit the limit first: its hash store keeps MPI_Init off files.)
    p = train(out, sets=["train.steps=40", "evidence.checkpoint_every=0"], preexec_fn=limit,
              env=dict(os.environ, PMIX_MCA_gds="hash"))
    expect(p, 1, r"shardproof: error: evidence incomplete: cannot write '[^']*(checksums\.jsonl|trace/rank-00000\.jsonl)'"
                 r": File too large")
    check("done:" not in p.stderr, "a run with incomplete evidence printed its done line")
    for f in ["checksums.jsonl", "metrics.jsonl", "trace/rank-00000.jsonl", "timeline/rank-00000.jsonl"]:
        whole_lines(os.path.join(out, f))
    # 2. A real full disk, with a committed checkpoint before it fills (root only: mount).
    mnt = fresh(work("tmpfs"))
    os.makedirs(mnt)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=5300k", "tmpfs", mnt]).returncode:
        print("SKIP tmpfs part: cannot mount a tmpfs here (the file size limit above covers the code path)")
        return
    try:
        out = os.path.join(mnt, "run")
        p = train(out, sets=["train.steps=60", "evidence.checkpoint_every=10", "evidence.keep_last=1"])
        expect(p, 1, "No space left on device", r"saving checkpoint step 20: not saved \(LATEST is unchanged\): "
                     r"evidence incomplete: cannot write '[^']+'")
        latest = json.load(open(os.path.join(out, "checkpoints", "LATEST")))
        check(latest["step"] == 10, f"LATEST moved: {latest}")
        v = run(["ckpt", "verify", out])
        expect(v, 0, "step-000010: OK")
        for f in ["checksums.jsonl", "metrics.jsonl", "trace/rank-00000.jsonl"]:
            whole_lines(os.path.join(out, f))
        for root, _, files in os.walk(os.path.join(out, "checkpoints")):
            for f in files:
                check(os.path.getsize(os.path.join(root, f)) > 0, f"zero-byte {f} in {root}")
    finally:
        subprocess.run(["umount", mnt])


def case_out_dir():
    a = fresh(work("dirs", "a"))
    expect(train(a, ranks=2), 0, "done: 4 steps")
    before = sha(os.path.join(a, "checksums.jsonl"))
    # A finished run (no checkpoints) is refused, exit 2, untouched.
    expect(train(a), 2, r"holds another run \(.*\) and no checkpoint to continue", "--overwrite")
    check(sha(os.path.join(a, "checksums.jsonl")) == before, "a refused run changed checksums.jsonl")
    # --overwrite clears it: one rank after two leaves no rank-1 file, and the trace check passes.
    expect(train(a, "--overwrite"), 0, "done: 4 steps")
    for d in ["trace", "timeline"]:
        check(sorted(os.listdir(os.path.join(a, d))) == ["rank-00000.jsonl"], f"{d}/: {os.listdir(os.path.join(a, d))}")
    expect(run(["trace", "check", a]), 0, "consistent", "as predicted")
    # Foreign files: refused even with --overwrite, and kept.
    f = fresh(work("dirs", "foreign"))
    os.makedirs(f)
    open(os.path.join(f, "notes.txt"), "w").write("mine\n")
    expect(train(f, "--overwrite"), 2, r"holds an entry that no shardproof run writes \(notes\.txt\)")
    check(os.path.exists(os.path.join(f, "notes.txt")), "a foreign file was removed")
    # A sealed proof bundle: never, not with --overwrite, not inside it; nothing created.
    s = fresh(work("dirs", "sealed"))
    os.makedirs(os.path.join(s, "parallel"))
    open(os.path.join(s, "bundle.sha256"), "w").write("")
    open(os.path.join(s, "contract.json"), "w").write("{}")
    expect(train(s, "--overwrite"), 2, "is a sealed proof bundle")
    expect(train(os.path.join(s, "parallel"), "--overwrite"), 2, "is inside a sealed proof bundle")
    check(open(os.path.join(s, "contract.json")).read() == "{}" and not os.listdir(os.path.join(s, "parallel")),
          "a sealed bundle was touched")
    # Two runs into one directory: the second fails at once, naming the directory and the first's pid.
    c = fresh(work("dirs", "concurrent"))
    first = subprocess.Popen([ARGS.bin, "train", "--out", c ] + SMALL +
                             ["--set", "train.steps=100000"], stderr=subprocess.PIPE, text=True)
    try:
        pids_of(c)
        t0 = time.time()
        p = train(c, "--overwrite", timeout=60)
        took = time.time() - t0
        expect(p, 1, rf"'{re.escape(c)}' is in use by another process \(pid {first.pid} on host")
        check(took < 20, f"the second run took {took:.1f} s to fail")
        check(first.poll() is None, "the first run stopped")
    finally:
        first.kill()
        first.wait()
    # A directory with checkpoints resumes (--resume auto): allowed.
    r = fresh(work("dirs", "resume"))
    expect(train(r, "--stop-after", "2", sets=["evidence.checkpoint_every=2"]), 0, "done: 2 steps")
    expect(train(r, sets=["evidence.checkpoint_every=2"]), 0, r"resuming from checkpoint step 2",
           r"done: 4 steps \(resumed at step 2\)")
    expect(train(r, "--overwrite", "--resume", "required"), 2, "--overwrite clears --out")


def case_launcher_kill():
    for sig in (signal.SIGTERM, signal.SIGKILL):
        out = fresh(work("kill", sig.name))
        launcher = subprocess.Popen([ARGS.bin, "train", "--np", "2", "--out", out] + SMALL +
                                    ["--set", "train.steps=100000", "--set", "parallel.dp=2"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                    start_new_session=True)
        try:
            ranks = pids_of(out)
            check(all(alive(p) for p in ranks), "the ranks are not running")
            launcher.send_signal(sig)
            t0 = time.time()
            while time.time() - t0 < 15 and any(alive(p) for p in ranks):
                time.sleep(0.1)
            left = [p for p in ranks if alive(p)]
            check(not left, f"{sig.name} of the launcher left rank processes {left} running after 15 s")
            launcher.wait(timeout=30)
            print(f"{sig.name}: every rank ended {time.time() - t0:.1f} s after the launcher was signalled")
            if sig == signal.SIGTERM:
                check(launcher.returncode == -signal.SIGTERM, f"the launcher exited {launcher.returncode}")
                check("interrupted by" in launcher.stderr.read(), "the launcher did not say it was interrupted")
        finally:
            if launcher.poll() is None:
                os.killpg(launcher.pid, signal.SIGKILL)
            for p in pids_of(out, timeout=1):
                if alive(p):
                    os.kill(p, signal.SIGKILL)


def case_frozen_rank():
    out = fresh(work("frozen"))
    job = subprocess.Popen(mpirun(2) + [ARGS.bin, "train", "--out", out] + SMALL +
                           ["--set", "train.steps=100000", "--set", "parallel.dp=2",
                            "--set", "evidence.watchdog_seconds=3"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ranks = pids_of(out)
        time.sleep(1)
        os.kill(ranks[1], signal.SIGSTOP)
        text, _ = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
        for p in ranks:
            if alive(p):
                os.kill(p, signal.SIGKILL)
    check(job.returncode != 0, "the job did not fail")
    for pat in [r"watchdog: world rank 1 never reached seq \d+ of group '[^']+', where world rank 0 waited",
                rf"its process {ranks[1]} on this host is stopped \(state T"]:
        check(re.search(pat, text), f"output lacks /{pat}/:\n{text[-4000:]}")


def case_huge_steps():
    out = fresh(work("huge"))
    t0 = time.time()
    p = train(out, "--stop-after", "2", sets=["train.steps=1000000000000"], timeout=60)
    took = time.time() - t0
    expect(p, 0, "done: 2 steps")
    size = os.path.getsize(os.path.join(out, "comm_predicted.json"))
    check(size < 4096, f"comm_predicted.json is {size} bytes")
    check(took < 30, f"2 steps of a 10^12-step run took {took:.1f} s")
    expect(run(["trace", "check", out]), 0, "as predicted", r"the 999999999998 steps after it were never reached")
    # train.steps × global batch must fit the loader's numbering.
    expect(train(fresh(work("huge2")), sets=["train.steps=1099511627776", "train.global_batch=1048576",
                                             "train.micro_batch_size=1"]),
           2, r"exceeds 2\^62")
    print(f"10^12 steps: 2 steps in {took:.1f} s, comm_predicted.json {size} bytes")


def token_batch(path, rows, cols, ids=()):
    open(path, "wb").write(b"SPTOKBAT" + struct.pack("<IIII", 1, rows, cols, 0) + struct.pack(f"<{len(ids)}i", *ids))


def weights():
    """A tiny model's consolidated weights and its model config (train + ckpt export)."""
    out = work("weights")
    if not os.path.exists(os.path.join(out, "w", "model.safetensors")):
        fresh(out)
        expect(train(os.path.join(out, "run"), sets=["train.steps=1", "evidence.checkpoint_every=1"]), 0, "done")
        expect(run(["ckpt", "export", os.path.join(out, "run"), "--out", os.path.join(out, "w", "model.safetensors")]), 0)
        model = json.load(open(os.path.join(out, "run", "contract.json")))["config"]["model"]
        json.dump({"model": model}, open(os.path.join(out, "model.json"), "w"))
    return os.path.join(out, "model.json"), os.path.join(out, "w", "model.safetensors")


def case_bad_inputs():
    cfg, w = weights()
    d = fresh(work("inputs"))
    os.makedirs(d)
    grads = lambda tokens, wts=w: run(["grads", "--config", cfg, "--weights", wts, "--tokens", tokens,
                                       "--out", os.path.join(d, "g.safetensors")])
    for rows, cols in [(2 ** 31, 2 ** 31), (2 ** 32 - 1, 2 ** 32 - 1)]:
        token_batch(os.path.join(d, "big.bin"), rows, cols)
        p = grads(os.path.join(d, "big.bin"))
        expect(p, 1, rf"its header \({rows} × {cols} tokens of 4 bytes\) describes more than 2\^64 bytes")
        check("length_error" not in p.stderr and "signal" not in p.stderr, p.stderr)
    token_batch(os.path.join(d, "pad.bin"), 2, 9, [5] + [-1] * 8 + [6] + [-1] * 8)
    expect(grads(os.path.join(d, "pad.bin")), 2, "has no target token")
    token_batch(os.path.join(d, "ok.bin"), 2, 9, list(range(18)))
    expect(grads(os.path.join(d, "ok.bin")), 0, "loss [0-9.]+; 39 gradients")
    raw = bytearray(open(w, "rb").read())
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    at = 8 + n + header["model.layers.1.mlp.up_proj.weight"]["data_offsets"][0] + 4 * 5
    raw[at:at + 4] = struct.pack("<f", float("nan"))
    os.makedirs(os.path.join(d, "nan"))
    open(os.path.join(d, "nan", "model.safetensors"), "wb").write(raw)
    expect(grads(os.path.join(d, "ok.bin"), os.path.join(d, "nan", "model.safetensors")), 2,
           r"tensor 'model\.layers\.1\.mlp\.up_proj\.weight' holds a non-finite value \(nan\) at element 5")
    # An eval split without one batch (here 0 tokens): refused before training, naming the split.
    p = train(fresh(work("noeval")), sets=["data.eval_fraction=0.00001"], timeout=300)
    expect(p, 2, r"the eval split of '[^']+' has 0 tokens", "train.eval_batches = 2")
    check("nan" not in p.stderr.lower(), p.stderr)


def case_messages():
    p = train(fresh(work("msg", "vocab")), sets=["data.vocab_size=100"])
    expect(p, 2, r"shardproof: error: data.vocab_size: vocab_size 100")
    check(": error:" not in p.stderr.replace("shardproof: error:", ""), f"an empty error prefix:\n{p.stderr}")
    check("--vocab-size" not in p.stderr, "train's hint names data prepare's --vocab-size")
    expect(run(["train", "--np", "0", "--out", work("msg", "np0")] + SMALL), 2, "number of MPI ranks must be")
    expect(run(["train", "--config", work("msg", "missing.toml"), "--out", work("msg", "x")]), 2,
           r"shardproof: error: config file '.*missing\.toml' does not exist")
    # Too big for this machine: refused from the ledger's prediction before allocating, both numbers.
    p = train(fresh(work("msg", "huge")), sets=["model.dim=8192", "model.n_layers=64", "model.ffn_dim=22016",
                                                "model.n_heads=64", "model.n_kv_heads=64", "model.max_seq=32"])
    expect(p, 2, r"the memory ledger predicts a peak of [0-9.]+ GiB \([0-9]+ bytes\) .* but only [0-9.]+ GiB "
                 r"\([0-9]+ bytes\) are available")
    # Summary lines: no evaluation; after a resume, no initial evaluation.
    expect(train(fresh(work("msg", "noeval")), sets=["train.eval_batches=0"]), 0, "done: 4 steps, loss [0-9.]+, no evaluation ran, ")
    r = fresh(work("msg", "resume"))
    expect(train(r, "--stop-after", "2", sets=["evidence.checkpoint_every=2"]), 0)
    p = train(r, sets=["evidence.checkpoint_every=2"])
    expect(p, 0, r"done: 4 steps \(resumed at step 2\), loss [0-9.]+, eval loss [0-9.]+, ")
    check("at init" not in p.stderr and "nan" not in p.stderr, p.stderr[-1000:])
    # LATEST naming a step whose directory is gone; ckpt hints name ckpt's own --step.
    shutil.rmtree(os.path.join(r, "checkpoints", "step-000004"))
    expect(train(r, sets=["evidence.checkpoint_every=2"]), 1,
           r"'.*LATEST' names step 4, but its directory '.*step-000004' does not exist", "--fallback-previous")
    p = run(["ckpt", "export", r, "--out", work("msg", "x.safetensors")])
    expect(p, 1, "checkpoint step 4: its directory", "--step N")
    check("--fallback-previous" not in p.stderr, f"ckpt export's hint names train's flag:\n{p.stderr}")


def case_fp16_scaler():
    """fp16: the loss scaler is in checksums.jsonl (one record per step, docs/formats/checksums.md) and
    compared exactly: an unchanged run verifies bitwise-equal; the same run with a forced overflow at step 2
    (nan-injection: the scaler skips the step and halves the scale) diverges first at step 2's scaler record;
    a bf16 run has no scaler record; the records agree with metrics.jsonl."""
    f16 = ["train.precision=fp16", "fp16.initial_scale_power=16", "fp16.hysteresis=1"]
    a, b, c, h = (fresh(work(n)) for n in ("f16_a", "f16_b", "f16_overflow", "bf16"))
    for out, extra, sets in ((a, (), f16), (b, (), f16), (c, ("--fault", "nan-injection@2"), f16),
                             (h, (), ["train.precision=bf16"])):
        expect(train(out, *extra, sets=sets), 0)

    def records(d, phase):
        return [json.loads(line) for line in open(os.path.join(d, "checksums.jsonl")) if f'"{phase}"' in line]

    def metrics(d):
        return [json.loads(line) for line in open(os.path.join(d, "metrics.jsonl")) if '"loss"' in line]

    check(records(h, "scaler") == [], "a bf16 run wrote scaler records")
    for d in (a, c):
        sc = records(d, "scaler")
        check([r["step"] for r in sc] == [0, 1, 2, 3], f"{d}: scaler records at steps {[r['step'] for r in sc]}")
        for r, m in zip(sc, metrics(d)):
            check(r["scale"] == m["loss_scale"] and r["skipped"] == m["skipped"],
                  f"{d}: step {r['step']}: checksums {r} vs metrics {m}")
    sc = records(c, "scaler")
    check([r["skipped"] for r in sc] == [False, False, True, False], f"the forced overflow: {sc}")
    check(sc[3]["scale"] == sc[2]["scale"] / 2, f"the scale was not halved after the overflow: {sc}")
    expect(run(["verify", b, "--against", a]), 0, "bitwise-equal")
    out = os.path.join(c, "verify.json")
    expect(run(["verify", c, "--against", a, "--json", out]), 1, r"FIRST DIVERGENCE: step 2 loss scaler")
    first = json.load(open(out))["first_divergence"]
    check(first["step"] == 2 and first["phase"] == "scaler" and "skipped" in first["reason"],
          f"first divergence {first}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ARGS = ap.parse_args()
    os.makedirs(ARGS.work, exist_ok=True)
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    t0 = time.time()
    try:
        CASES[ARGS.case]()
    except (Failure, subprocess.TimeoutExpired) as e:
        print(f"FAIL {ARGS.case}: {e}")
        sys.exit(1)
    print(f"PASS {ARGS.case} ({time.time() - t0:.1f} s)")


if __name__ == "__main__":
    main()
