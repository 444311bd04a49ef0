#!/usr/bin/env python3
"""The gate never passes on incomplete or altered evidence (issue 20; docs/prove.md §gate).

A real proof bundle (dp 2 x pp 2, a bitwise class, signed with an Ed25519 key) is the fixture (case `base`).
Every other case copies it, alters it as a hostile user would and, where the case says so, reseals it
(recomputes bundle.sha256, as anyone can), then requires `shardproof verify` to FAIL naming the criterion
and the detail the table states. Each criterion of the gate has at least one row; the rows also cover the
findings of issue 20: records compared only where both sides have them, strictness from what the run
achieved, statistics other than the digest ignored, redundant records not cross-checked, a resealed bundle
indistinguishable from the original, derived files edited.
`verify_against` checks `verify RUN --against REF` for incomplete and not-comparable runs, and that its verdict
covers only the steps it verified (exit 3 for a free-running tensor-parallel run; bitwise on one topology).
Usage: gate_tamper.py CASE --bin shardproof --work DIR
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402
from bundle_edit import DERIVED, dump_like_engine, edit_records, lines, loss_bits, reseal, write_lines  # noqa: E402,F401

SMALL = ["model.dim=128", "model.ffn_dim=344", "model.n_layers=4", "model.max_seq=64", "train.seq_len=64",
         "train.steps=6", "train.eval_every=3", "train.eval_batches=2", "train.warmup_steps=1", "train.lr=5e-3",
         "prove.checkpoint_step=3", "prove.eval_margin=0.25"]
TOPOLOGY = ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"]


fail, run = T.fail, T.run


def sets(extra=()):
    return T.sets(SMALL + list(extra))


def paths(work):
    return os.path.join(work, "base"), os.path.join(work, "key.pem"), os.path.join(work, "key.pub")


# --------------------------------------------------------------------------------------------- the table
def truncate_checksums(b):
    p = os.path.join(b, "parallel", "checksums.jsonl")
    write_lines(p, lines(p)[:79])


def one_grad_digest(b):
    edit_records(os.path.join(b, "parallel", "checksums.jsonl"), lambda r, i: r["step"] == 5 and r["phase"] == "grad"
                 and r["tensor"] == "model.layers.1.mlp.up_proj.weight", lambda r: r.update(digest="0" * 32))


def l2_raised(b):
    def change(r):
        r["l2"] *= 40
        r["absmax"] = r["absmax"]  # stays ≤ l2: only the comparison with the reference can see it
    edit_records(os.path.join(b, "parallel", "checksums.jsonl"), lambda r, i: r["step"] == 2 and r["phase"] == "param"
                 and r["tensor"] == "model.norm.weight", change)


def sum_negated(b):
    edit_records(os.path.join(b, "parallel", "checksums.jsonl"), lambda r, i: r["step"] == 1 and r["phase"] == "param"
                 and r["tensor"] == "model.layers.0.input_layernorm.weight", lambda r: r.update(sum=-r["sum"]))


def count_changed(b):
    edit_records(os.path.join(b, "parallel", "checksums.jsonl"), lambda r, i: r["step"] == 0 and r["phase"] == "grad"
                 and r["tensor"] == "lm_head.weight", lambda r: r.update(count=r["count"] - 1))


def loss_forged_everywhere(b):
    for stage in ("reference", "parallel", "fault", "recovery"):
        def change(r):
            r["value"] = r["value"] * 0.5
            r["bits"] = loss_bits(r["value"])
        edit_records(os.path.join(b, stage, "checksums.jsonl"), lambda r, i: r["phase"] == "loss" and r["step"] == 4,
                     change)


def manifest_steps_edited(b):
    step_dir = os.path.join(b, "parallel", "checkpoints", "step-000003")
    mpath = os.path.join(step_dir, "manifest.json")
    with open(mpath) as f:
        m = json.load(f)
    old = m["digest"]
    body = {k: v for k, v in m.items() if k != "digest"}
    if hashlib.sha256(dump_like_engine(body).encode()).hexdigest() != old:
        fail("cannot reproduce the manifest digest: the test's dump differs from the engine's")
    m["optimizer"]["steps_taken"] = m["optimizer"]["steps_taken"] - 1  # still plausible: only the shards can tell
    body = {k: v for k, v in m.items() if k != "digest"}
    m["digest"] = hashlib.sha256(dump_like_engine(body).encode()).hexdigest()
    with open(mpath, "w") as f:
        f.write(json.dumps(m, indent=2, ensure_ascii=False) + "\n")
    latest = os.path.join(b, "parallel", "checkpoints", "LATEST")
    lt = json.loads(open(latest).read())
    if lt["step"] == 3:
        lt["manifest_digest"] = m["digest"]
        open(latest, "w").write(dump_like_engine(lt) + "\n")


def prediction_edited(b):
    p = os.path.join(b, "parallel", "comm_predicted.json")
    d = json.load(open(p))
    classes = d["ranks"][0]["classes"]
    classes[sorted(classes)[0]] = {}  # one step class of rank 0 predicts no traffic
    open(p, "w").write(dump_like_engine(d) + "\n")


def ledger_edited(b):
    p = os.path.join(b, "parallel", "ledger.json")
    d = json.load(open(p))
    d["equal"] = False
    open(p, "w").write(json.dumps(d) + "\n")


def stage_failed(b):
    p = os.path.join(b, "prove.json")
    d = json.load(open(p))
    for s in d["stages"]:
        if s["name"] == "recovery":
            s["exit_code"] = 1
    open(p, "w").write(json.dumps(d, indent=2) + "\n")


def contract_edited(b):
    p = os.path.join(b, "parallel", "contract.json")
    d = json.load(open(p))
    d["config"]["train"]["seed"] = 99
    open(p, "w").write(json.dumps(d, indent=2) + "\n")


def topology_edited(b):
    p = os.path.join(b, "parallel", "topology.json")
    d = json.load(open(p))
    d["world_size"] = 8
    open(p, "w").write(json.dumps(d, indent=2) + "\n")


def trace_record_removed(b):
    p = os.path.join(b, "parallel", "trace", "rank-00001.jsonl")
    ls = lines(p)
    write_lines(p, ls[:10] + ls[11:])


def recovery_from_scratch(b):
    # The recovery's trace no longer shows a resume (its first steps claim to be the uninterrupted run's).
    p = os.path.join(b, "recovery", "trace", "rank-00000.jsonl")
    out = []
    for line in lines(p):
        r = json.loads(line)
        if r.get("step", -1) >= 3:
            r["step"] -= 3
        out.append(json.dumps(r))
    write_lines(p, out)


def fault_hidden(b):
    # The fault stage's evidence replaced by the clean parallel run's: nothing shows the fault.
    shutil.rmtree(os.path.join(b, "fault"))
    shutil.copytree(os.path.join(b, "parallel"), os.path.join(b, "fault"))


def eval_changed(b):
    p = os.path.join(b, "parallel", "metrics.jsonl")
    edit_records(p, lambda r, i: "eval_loss" in r and r.get("step") == 5, lambda r: r.update(eval_loss=r["eval_loss"] + 1))


# Consistent forgeries (issue 31): each edit is applied to every stage alike, so only a cross-check sees it.
STAGES = ("reference", "parallel", "fault", "recovery")


def grad_norm_forged(b):
    for stage in STAGES:
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == 4 and "grad_norm" in r,
                     lambda r: r.update(grad_norm=r["grad_norm"] * 0.5))


def lr_forged(b):
    for stage in STAGES:
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == 2 and "lr" in r,
                     lambda r: r.update(lr=r["lr"] * 2))


def grad_forged_resealed(b):
    # Issue 45: a gradient forged consistently: one tensor's step-2 gradient record (l2, sum, absmax, digest) in
    # every stage alike (the fault is at step 3, so the first divergence stays there), and metrics' grad_norm
    # recomputed from the records (so "gradient norms agree" holds). Before the clipping row, every criterion
    # passed on it. Step 2 was clipped (norm 1.45 > 1): the recorded clip coefficient is no longer
    # min(1, max_norm / (grad_norm + 1e-6)).
    import math
    for stage in STAGES:
        sums = os.path.join(b, stage, "checksums.jsonl")

        def forge(r):
            r.update(l2=r["l2"] * 1.5, sum=r["sum"] * 1.5, absmax=r["absmax"] * 1.5, digest="f" * 32)
        edit_records(sums, lambda r, i: r["step"] == 2 and r["phase"] == "grad" and r["tensor"] == "lm_head.weight",
                     forge)
        norm = math.sqrt(sum(json.loads(l)["l2"] ** 2 for l in lines(sums)
                             if json.loads(l)["step"] == 2 and json.loads(l)["phase"] == "grad"))
        edit_records(os.path.join(b, stage, "metrics.jsonl"), lambda r, i: r.get("step") == 2 and "grad_norm" in r,
                     lambda r: r.update(grad_norm=norm))


def last_step_removed(b):
    for stage in STAGES:
        for name in ("metrics.jsonl", "checksums.jsonl"):
            p = os.path.join(b, stage, name)
            write_lines(p, [l for l in lines(p) if json.loads(l).get("step") != 5])


def recovery_trace_copied(b):
    # The recovery's trace is the parallel run's, its steps before k dropped: it never loaded the checkpoint.
    for name in os.listdir(os.path.join(b, "parallel", "trace")):
        kept = [l for l in lines(os.path.join(b, "parallel", "trace", name))
                if json.loads(l)["step"] >= 3 and json.loads(l)["phase"] != "checkpoint"]
        write_lines(os.path.join(b, "recovery", "trace", name), kept)


def summary_forged(b):
    p = os.path.join(b, "summary.md")
    s = open(p).read().replace("**FAIL**", "pass")
    open(p, "w").write(s + "\n(reviewed)\n")


def file_added(b):
    open(os.path.join(b, "parallel", "notes.txt"), "w").write("added later\n")


# name: (edit, reseal, criterion that must FAIL, text its line or detail must contain)
CASES = {
    "truncated_checksums": (truncate_checksums, True, "gradients equal the single-device reference", "incomplete"),
    "one_grad_digest": (one_grad_digest, True, "gradients equal the single-device reference", "promised bitwise"),
    # An l2 raised 40x contradicts the record itself (l2 > √numel·absmax) or, short of that, the equal digest.
    "l2_raised": (l2_raised, True, "gradients equal the single-device reference", "l2"),
    "sum_negated": (sum_negated, True, "gradients equal the single-device reference", "different sum"),
    "count_changed": (count_changed, True, "gradients equal the single-device reference", "count"),
    "loss_forged_everywhere": (loss_forged_everywhere, True, "records agree across views", "says loss"),
    "manifest_steps_edited": (manifest_steps_edited, True, "checkpoints verify", "manifest was edited"),
    "prediction_edited": (prediction_edited, True, "prediction re-derived from the contract", "not the plan"),
    "ledger_edited": (ledger_edited, True, "memory ledger equals the prediction", "\"equal\" is false"),
    "stage_failed": (stage_failed, True, "stages completed", "recovery"),
    "contract_edited": (contract_edited, True, "one contract across the stages", "parallel/contract.json"),
    "topology_edited": (topology_edited, True, "topology valid", "world size 8"),
    "trace_record_removed": (trace_record_removed, True, "traces consistent", "rank 1"),
    "recovery_from_scratch": (recovery_from_scratch, True, "resume is exact", "not at the checkpoint"),
    "fault_hidden": (fault_hidden, True, "fault detected and localized", "no view saw the fault"),
    "eval_changed": (eval_changed, True, "held-out eval improves and matches the reference", "eval"),
    "grad_norm_forged": (grad_norm_forged, True, "gradient norms agree across views", "metrics.jsonl: step 4"),
    "lr_forged": (lr_forged, True, "learning rates follow the contract's schedule", "metrics.jsonl: step 2"),
    "last_step_removed": (last_step_removed, True, "every view holds the contract's steps", "step 5 is missing"),
    "grad_forged_resealed": (grad_forged_resealed, True, "clipping and skips follow the gradient",
                             "reference/metrics.jsonl: step 2: clip"),
    "recovery_trace_copied": (recovery_trace_copied, True, "recovery resumed from its checkpoint",
                              "as a record of the parallel stage's trace does"),
    "resealed_unsigned_key": (file_added, True, None, "signature: FAIL"),
    "summary_forged": (summary_forged, False, None, "summary.md: differs"),
    "file_added": (file_added, False, "bundle sealed and unmodified", "notes.txt: not in the seal"),
}


def check_base(args):
    base, key, pub = paths(args.work)
    shutil.rmtree(base, ignore_errors=True)
    for p in (key, pub):
        if os.path.exists(p):
            os.remove(p)
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", key], check=True, capture_output=True)
    subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True, capture_output=True)
    p = run([args.bin, "prove", "--out", base, "--fault", "skip-grad-allreduce@3", "--quiet", "--sign", key]
            + sets(TOPOLOGY))
    print(p.stdout[-4000:], p.stderr[-2000:])
    if p.returncode != 0:
        fail("the untampered bundle did not PASS")
    v = run([args.bin, "verify", base, "--key", pub])
    if v.returncode != 0 or "signature: bundle.sha256 is signed by the key" not in v.stdout:
        fail(f"verify --key of the untampered, signed bundle:\n{v.stdout[-3000:]}")
    # A wrong key must fail.
    other = os.path.join(args.work, "other.pem")
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", other], check=True, capture_output=True)
    other_pub = other + ".pub"
    subprocess.run(["openssl", "pkey", "-in", other, "-pubout", "-out", other_pub], check=True, capture_output=True)
    v = run([args.bin, "verify", base, "--key", other_pub])
    if v.returncode == 0:
        fail("verify --key with another key passed")
    print("PASS base: PASS, signature verifies with its key and not with another")


def check_case(args, name, spec=None, base=None):
    """Copies the fixture (`base`: the dp2 x pp2 bundle of case base), applies spec = (edit, reseal, criterion,
    text) of CASES[name], and requires verify to FAIL at that criterion naming that text."""
    edit, do_reseal, criterion, expect = spec or CASES[name]
    default_base, key, pub = paths(args.work)
    base = base or default_base
    if not os.path.isfile(os.path.join(base, "bundle.sha256")):
        fail(f"the fixture bundle {base} is missing: run its fixture case first")
    out = os.path.join(args.work, name)
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(base, out)
    edit(out)
    if do_reseal:
        reseal(out)
    v = run([args.bin, "verify", out, "--key", pub])
    text = v.stdout
    shutil.rmtree(out, ignore_errors=True)
    if v.returncode != 1 or "verdict: FAIL" not in text:
        fail(f"{name}: verify exit {v.returncode}, expected FAIL\n{text[-4000:]}")
    if criterion is not None:
        block = [l for l in text.splitlines() if l.startswith("  FAIL ")]
        hit = [i for i, l in enumerate(text.splitlines()) if l.startswith("  FAIL " + criterion)]
        if not hit:
            fail(f"{name}: criterion {criterion!r} did not fail; failed: {block}\n{text[-4000:]}")
        i = hit[0]
        window = "\n".join(text.splitlines()[i:i + 2])
        if expect not in window:
            fail(f"{name}: {criterion!r} failed without naming {expect!r}:\n{window}")
    elif expect not in text:
        fail(f"{name}: verify did not say {expect!r}\n{text[-3000:]}")
    print(f"PASS {name}: FAIL at {criterion or 'derived files'} naming {expect!r}")


def check_verify_against(args):
    """verify RUN --against REF: complete records and comparable contracts, or a clear verdict."""
    work = os.path.join(args.work, "against")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    train = [args.bin, "train", "--quiet"]
    runs = {}
    for name, extra in {"ref": [], "other_seed": ["train.seed=99"], "short": ["train.steps=4"]}.items():
        out = os.path.join(work, name)
        p = run(train + ["--out", out] + sets(extra))
        if p.returncode != 0:
            fail(f"train {name}: {p.stderr[-2000:]}")
        runs[name] = out

    def verify(run_dir, expect_rc, expect):
        v = run([args.bin, "verify", run_dir, "--against", runs["ref"]])
        both = v.stdout + v.stderr
        if v.returncode != expect_rc or expect not in both:
            fail(f"verify {run_dir} --against ref: exit {v.returncode}, expected {expect_rc} with {expect!r}\n{both}")
        print(f"PASS verify --against {os.path.basename(run_dir)}: {expect!r}")

    verify(runs["other_seed"], 1, "not comparable")
    verify(runs["short"], 1, "not comparable")
    cut = os.path.join(work, "cut")
    shutil.copytree(runs["ref"], cut)
    p = os.path.join(cut, "checksums.jsonl")
    write_lines(p, lines(p)[:1])
    verify(cut, 1, "incomplete")
    verify(runs["ref"], 0, "bitwise-equal")
    # Issue 31: a verdict never covers a step that was not verified. A free-running tensor-parallel run is
    # comparable with the reference at step 0 only: it says so and exits 3 (not 0), also with a fault at step 2
    # that step 0 cannot see; against a run of the same topology and contract it is held to bitwise.
    tp = {"tp2": ([], []), "tp2_again": ([], []), "tp2_fault": ([], ["--fault", "drop-tp-allreduce@2"])}
    for name, (extra, flags) in tp.items():
        out = os.path.join(work, name)
        p = run(T.launch(args.bin, 2) + train[1:] + ["--out", out] + flags + sets(extra + ["parallel.tp=2"]))
        if p.returncode != 0:
            fail(f"train {name}: {p.stderr[-2000:]}")
        runs[name] = out
    verify(runs["tp2"], 3, "within-tolerance at step 0 only (1 of 6 steps verified)")
    verify(runs["tp2_fault"], 3, "steps 1–5 NOT verified")
    v = run([args.bin, "verify", runs["tp2_fault"], "--against", runs["tp2"]])
    if v.returncode != 1 or "one contract on one topology" not in v.stdout or "FIRST DIVERGENCE: step 2" not in v.stdout:
        fail(f"the fault run against the clean run of its topology: exit {v.returncode}\n{v.stdout}")
    v = run([args.bin, "verify", runs["tp2_again"], "--against", runs["tp2"]])
    if v.returncode != 0 or "bitwise-equal" not in v.stdout:
        fail(f"two runs of one contract on one topology: exit {v.returncode}\n{v.stdout}")
    print("PASS verify --against tp2: 1 of 6 steps verified (exit 3); same topology bitwise (the fault at step 2)")
    shutil.rmtree(work, ignore_errors=True)


def check_moved_fail_bundle(args):
    """Issue 31, item 10: a FAIL bundle copied to another name derives the same verdict, byte for byte: no
    detail names the directory the bundle happens to be in (docs/report.md: a moved bundle, the same document)."""
    base, _, _ = paths(args.work)
    gates = []
    for name in ("moved_a", "moved_b_elsewhere"):
        out = os.path.join(args.work, name)
        shutil.rmtree(out, ignore_errors=True)
        if not gates:
            shutil.copytree(base, out)
            truncate_checksums(out)  # the detail names parallel/checksums.jsonl
            reseal(out)
        else:
            shutil.copytree(os.path.join(args.work, "moved_a"), out)
        v = run([args.bin, "verify", out])
        lines = [l for l in v.stdout.splitlines() if l.startswith("  ") and not l.startswith("  hint:")]
        if v.returncode != 1 or not any("parallel/checksums.jsonl" in l for l in lines):
            fail(f"{name}: expected a FAIL naming parallel/checksums.jsonl, exit {v.returncode}\n{v.stdout[-3000:]}")
        leaked = [l for l in lines if os.path.abspath(out) in l or args.work in l]
        if leaked:
            fail(f"{name}: the verdict names the bundle's directory: {leaked[:3]}")
        gates.append(lines)
    for name in ("moved_a", "moved_b_elsewhere"):
        shutil.rmtree(os.path.join(args.work, name), ignore_errors=True)
    if gates[0] != gates[1]:
        fail(f"the same bundle under two names derives two verdicts:\n{gates[0]}\n{gates[1]}")
    print("PASS moved_fail_bundle: the same FAIL verdict under another name, no directory in it")


def main():
    args = T.case_args(["base", "verify_against", "moved_fail_bundle"] + list(CASES))
    os.makedirs(args.work, exist_ok=True)
    if args.case == "base":
        check_base(args)
    elif args.case == "verify_against":
        check_verify_against(args)
    elif args.case == "moved_fail_bundle":
        check_moved_fail_bundle(args)
    else:
        check_case(args, args.case)


if __name__ == "__main__":
    main()
