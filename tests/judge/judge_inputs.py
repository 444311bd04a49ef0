#!/usr/bin/python3
"""`shardproof judge` and python/shardproof_torch on what they must refuse, and on their neighbours
(docs/judge.md §6, RELIABILITY.md rows 24-26): each refusal names the file, record or declaration and the fix.

Cases (CASE --bin shardproof --work DIR):
  recorder        the recorder refuses, before it writes a step: a name, shape or rank the config and grid do not
                  have; a second recording into one directory; a resume under another contract; a collective it
                  cannot record; and what the judge could not judge: a float gradient_divisor, 2^64 steps, betas of
                  1e300, a negative weight decay, a strategy named for another one, a bias, a bf16 parameter, a
                  forward under an undeclared autocast, an enabled GradScaler, an optimizer other than AdamW's CPU
                  arithmetic;
                  Hugging Face batches it cannot say (prompt masking, left padding, packed sequences); NaN is written
                  as text, never as invalid JSON
  bad_input       a recording that is incomplete, from another model, edited or missing a rank is refused
                  (exit 2) naming the file and record, and nothing is judged (no judge/gate.json)
  declarations    contract.json edited and re-hashed as a forger would: a float gradient_divisor, steps = 2^64,
                  betas of 1e300, a negative weight decay, "fsdp-full-shard" on a DDP recording — each refused
                  (exit 2) naming the field with the declaration hint, never judged into a FAIL or a -nan
  neighbours      judge writes only under DIR/judge/: a user's summary.md, report.html, checksums.jsonl and gate.json
                  in DIR are left byte for byte and `shardproof report DIR` keeps working; two judges at once on one
                  directory both finish; a proof bundle or an engine run is named as such with the command to use; a
                  seal naming '..' or an absolute path, a symlinked records file (named as the link), a trace cut
                  mid-line: refused (exit 2)
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import judge_support as J  # noqa: E402
import sp_test as T  # noqa: E402


def case_recorder(args):
    import numpy as np
    import torch
    import torch.distributed as dist
    from shardproof_torch import Recorder, batches, files
    from shardproof_torch.declared import Refused
    from shardproof_torch.trace import UnsupportedCollective
    ok = T.Checks()
    cfg = {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 8}
    hyper = {"lr_schedule": "constant", "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "no_decay": [],
             "max_grad_norm": 1.0, "implementation": "torch.optim.AdamW"}
    base = dict(strategy={"name": "single", "dp": 1, "tp": 1, "pp": 1}, hf_config=cfg, optimizer=None, hyper=hyper,
                batch={"micro_batch": 1, "micro_batches": 1, "seq_len": 4}, steps=2, quiet=True)

    def norm():
        return [("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)]

    def refused(name, expect, **kw):
        out = T.fresh(os.path.join(args.work, "recorder-" + name))
        a = dict(base, rank=0, parameters=norm())
        a.update(kw)
        try:
            Recorder(out, **a).finish()
        except (ValueError, FileExistsError) as e:
            print(f"{name}: {e}")
            return ok(expect in str(e), f"{name}: the recorder said '{e}', expected '{expect}'")
        return ok(False, f"{name}: the recorder accepted it")

    refused("unknown_name", "not a tensor of a LLaMA model",
            parameters=[("model.layers.0.attn.weight", torch.nn.Parameter(torch.ones(16)), None)])
    refused("wrong_shape", "has shape [8]", parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(8)), None)])
    refused("wrong_piece", "its shard (0, 0, 2) give [16, 16]",
            parameters=[("model.embed_tokens.weight", torch.nn.Parameter(torch.ones(32, 16)), (0, 0, 2))])
    refused("rank_outside", "outside the declared world", rank=3)
    refused("hyper", "missing ['eps']", hyper={k: v for k, v in hyper.items() if k != "eps"})
    # Issue 45 item 4: what the judge would refuse later, refused when the run starts, naming the declaration.
    refused("float_divisor", "gradient_divisor = 2.0: an integer >= 1", gradient_divisor=2.0)
    refused("steps_2_64", "steps = 18446744073709551616", steps=2 ** 64)
    refused("betas_1e300", "hyper betas[0] = 1e+300", hyper=dict(hyper, betas=[1e300, 0.95]))
    refused("negative_wd", "hyper weight_decay = -0.1", hyper=dict(hyper, weight_decay=-0.1))
    refused("name_fsdp", "says 'fsdp' (ZeRO stage 2 or 3), but the strategy declares zero = 0",
            strategy={"name": "fsdp-full-shard", "dp": 1, "tp": 1, "pp": 1})
    refused("attention_bias", "attention_bias = true", hf_config=dict(cfg, attention_bias=True))
    refused("bf16", "is torch.bfloat16", parameters=[("model.norm.weight",
                                                        torch.nn.Parameter(torch.ones(16, dtype=torch.bfloat16)), None)])
    refused("schedule", "hyper lr_schedule: kind 'step'",
            hyper=dict(hyper, lr_schedule={"kind": "step", "lr": 1e-3, "warmup_steps": 0, "total_steps": 2,
                                           "min_ratio": 0, "warmup_start": 0}))
    p = torch.nn.Parameter(torch.ones(16))
    refused("sgd", "the judge replays AdamW", optimizer=torch.optim.SGD([p], lr=0.1),
            parameters=[("model.norm.weight", p, None)])
    refused("amsgrad", "amsgrad=True", optimizer=torch.optim.AdamW([p], lr=0.1, amsgrad=True),
            parameters=[("model.norm.weight", p, None)])
    bias_model = torch.nn.Linear(16, 16, bias=True)
    refused("bias", "a bias the config does not have", model=bias_model)

    def step_refused(name, expect, body):
        out = T.fresh(os.path.join(args.work, "recorder-" + name))
        params = norm()
        rec = Recorder(out, rank=0, parameters=params, **base)
        try:
            rec.begin_step(0, 1e-3)
            body(rec, params[0][1])
            ok(False, f"{name}: accepted")
        except Refused as e:
            print(f"{name}: {e}")
            ok(expect in str(e), f"{name}: said '{e}', expected '{expect}'")
        finally:
            rec.trace.uninstall()

    def under_autocast(rec, p):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            rec.micro_batch(0, torch.zeros(1, 5, dtype=torch.int64))
    step_refused("autocast", "inside an autocast region", under_autocast)

    def with_scaler(rec, p):
        from torch.cuda.amp import GradScaler
        s = GradScaler(enabled=False)
        s._enabled = True  # an enabled scaler: CPU-only torch 1.13 disables its own, a GPU run's is enabled
        p.grad = torch.zeros(16)
        rec.gradients()
    step_refused("grad_scaler", "an enabled GradScaler the Recorder was not given exists", with_scaler)

    # Hugging Face batches: what the engine's rows can say is accepted, the rest refused by name.
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    labels = torch.tensor([[5, 6, 7, 8], [9, 10, 11, -100]])
    rows = batches.engine_rows(ids, labels, mask)
    ok(rows.tolist() == [[5, 6, 7, 8], [9, 10, 11, -1]], f"right padding: rows {rows.tolist()}")
    for name, kw, expect in (
            ("prompt_masking", dict(labels=torch.tensor([[5, -100, 7, 8], [9, 10, 11, -100]]), attention_mask=mask),
             "prompt masking"),
            ("left_padding", dict(attention_mask=torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])), "left padding"),
            ("packed", dict(position_ids=torch.tensor([[0, 1, 0, 1], [0, 1, 2, 3]])), "packed sequences")):
        try:
            batches.engine_rows(ids, **kw)
            ok(False, f"{name}: accepted")
        except Refused as e:
            print(f"{name}: {e}")
            ok(expect in str(e), f"{name}: said '{e}'")
    logits = torch.randn(2, 4, 32)
    s, n = batches.token_loss_sum(logits, labels)
    ok(n == 5 and abs(float(s) - float(torch.nn.functional.cross_entropy(
        logits[:, :-1].reshape(-1, 32), labels[:, 1:].reshape(-1), ignore_index=-100, reduction="sum"))) < 1e-5,
       f"token_loss_sum: {float(s)}, {n} targets")
    # A diverged run's numbers are text in valid JSON.
    line = files.jsonl_line({"lr": files.finite_or_text(float("nan")), "n": files.finite_or_text(-np.inf)})
    ok(line == b'{"lr":"nan","n":"-inf"}\n', f"non-finite numbers: {line}")
    # The earlier refusals: a second recording, a resume under another contract, a collective it cannot record.
    out = os.path.join(args.work, "recorder-twice")
    T.fresh(out)
    Recorder(out, rank=0, parameters=norm(), **base).finish()
    try:
        Recorder(out, rank=0, parameters=norm(), **base)
        ok(False, "a second recording into the same directory was accepted")
    except FileExistsError as e:
        ok("record into a new directory" in str(e), f"twice: {e}")
    try:
        Recorder(out, rank=0, parameters=norm(), resume_step=1, **dict(base, steps=3))
        ok(False, "a resume under another contract was accepted")
    except ValueError as e:
        ok("another contract" in str(e) and "steps" in str(e), f"resume: {e}")
    out = T.fresh(os.path.join(args.work, "recorder-refuse-op"))
    rec = Recorder(out, rank=0, parameters=norm(), **base)
    try:
        dist.all_to_all([torch.ones(1)], [torch.ones(1)])
        ok(False, "all_to_all was not refused")
    except UnsupportedCollective as e:
        ok("all_to_all is not recorded" in str(e), f"all_to_all: {e}")
    rec.finish()
    return ok.verdict("recorder")


def refused(args, base, name, edit, expect, hint=None):
    d = J.copy_recording(base, os.path.join(args.work, "bad-" + name))
    edit(d)
    p = J.judge(args, d)
    msg = p.stderr + p.stdout
    good = p.returncode == 2 and expect in msg and (hint is None or hint in msg) and \
        not os.path.exists(J.judged(d, "gate.json"))
    print(("ok   " if good else "FAIL ") + f"{name}: exit {p.returncode}: {msg.strip()[:400]}")
    return good, f"{name}: expected exit 2 naming '{expect}' (hint '{hint}'), got {p.returncode}: {msg.strip()[:500]}"


def case_bad_input(args):
    import json
    ok = T.Checks()
    one = J.record(os.path.join(args.work, "bad-base-1"), "single", 2)
    two = J.record(os.path.join(args.work, "bad-base-2"), "ddp", 2)

    def drop_line(rel, pred):
        def f(d):
            lines = open(os.path.join(d, rel)).read().splitlines(keepends=True)
            open(os.path.join(d, rel), "w").write("".join(x for x in lines if not pred(json.loads(x))))
            J.reseal(d, 0, rel)
        return f

    def append(rel, text, seal=True):
        def f(d):
            with open(os.path.join(d, rel), "a") as fh:
                fh.write(text)
            if seal:
                J.reseal(d, 0, rel)
        return f

    def remove(rel, rank=0, seal=True):
        def f(d):
            os.remove(os.path.join(d, rel))
            if seal:
                J.reseal(d, rank, rel)
        return f

    def targets_wrong(d):
        rel = "tokens/rank-00000/step-000001.bin"
        b = bytearray(T.read_bytes(os.path.join(d, rel)))
        b[24 + 4 * 5:24 + 4 * 6] = (-1).to_bytes(4, "little", signed=True)  # a target becomes padding
        open(os.path.join(d, rel), "wb").write(bytes(b))
        J.reseal(d, 0, rel)

    cases = [
        (one, "no_seal", remove("seal/rank-00000.json", seal=False), "seal/rank-00000.json is missing"),
        (one, "edited_unsealed", append("records/rank-00000.jsonl", "\n", seal=False), "records/rank-00000.jsonl"),
        (one, "extra_file", lambda d: open(os.path.join(d, "records", "notes.jsonl"), "w").write("x"),
         "records/notes.jsonl is in no rank's seal"),
        (one, "missing_step", drop_line("records/rank-00000.jsonl", lambda r: r["kind"] == "step" and r["step"] == 1),
         "no step record for step 1"),
        (one, "missing_tensor",
         drop_line("records/rank-00000.jsonl", lambda r: r["kind"] == "tensor" and r["step"] == 1 and
                   r["phase"] == "grad" and r["tensor"] == "model.norm.weight"), "lacks model.norm.weight"),
        (one, "torn_record", append("records/rank-00000.jsonl", '{"kind": "step", "st'), "records/rank-00000.jsonl:"),
        (one, "other_model", lambda d: J.edit_contract(d, lambda c: c["model"].update(intermediate_size=192)),
         "another model"),
        (one, "contract_edited", lambda d: J.edit_contract(d, lambda c: c["optimizer"].update(weight_decay=0.0),
                                                           rehash=False), "the contract was edited"),
        (one, "grads_missing", remove("grads/step-000001/rank-00000.safetensors"), "gradients step 1"),
        (one, "state_missing", remove("state/step-000000/rank-00000.safetensors"), "no recorded state"),
        (one, "tokens_disagree", targets_wrong, "micro-batch 0"),
        (two, "missing_rank", lambda d: [os.remove(os.path.join(d, "seal", "rank-00001.json")),
                                         os.remove(os.path.join(d, "records", "rank-00001.jsonl"))],
         "rank 1 never finished"),
    ]
    for base, name, edit, expect in cases:
        if name == "state_missing":  # without its state the steps cannot be checked: UNVERIFIED, not refused
            d = J.copy_recording(base, os.path.join(args.work, "bad-" + name))
            edit(d)
            p = J.judge(args, d)
            ok(p.returncode == 3 and expect in open(J.judged(d, "summary.md")).read(),
               f"state_missing: exit {p.returncode}, expected 3 (UNVERIFIED) naming '{expect}'")
            continue
        good, why = refused(args, base, name, edit, expect)
        ok(good, why)
    p = T.run([args.bin, "judge", os.path.join(args.work, "no-such-dir")])
    ok(p.returncode == 2, f"a missing directory: exit {p.returncode}")
    return ok.verdict("bad_input")


DECLARATION_HINT = "record the run again with a declaration the judge can apply"


def case_declarations(args):
    ok = T.Checks()
    base = J.record(os.path.join(args.work, "decl-base"), "ddp", 2)
    for name, change, expect in (
            ("float_divisor", lambda c: c["loss"].update(gradient_divisor=2.0),
             "loss.gradient_divisor = 2.0: an integer >= 1"),
            ("steps_2_64", lambda c: c.update(steps=2 ** 64), "contract.steps must be an integer"),
            ("betas_1e300", lambda c: c["optimizer"].update(betas=[1e300, 0.95]),
             "optimizer.betas.beta1 = 1e+300 is outside [0, 1)"),
            ("negative_wd", lambda c: c["optimizer"].update(weight_decay=-0.1),
             "optimizer.weight_decay = -0.1 is outside [0, 1000000]"),
            ("name_fsdp", lambda c: c["strategy"].update(name="fsdp-full-shard"),
             "says 'fsdp' (ZeRO stage 2 or 3), but the strategy declares zero = 0"),
            ("name_tp", lambda c: c["strategy"].update(name="ddp-tp"), "says 'tp', but the grid declares tp = 1"),
            ("schedule_kind", lambda c: c["optimizer"].update(lr_schedule={"kind": "exp"}), "optimizer.lr_schedule"),
            ("precision", lambda c: c["precision"].update(autocast=True),
             'precision.autocast = true: false, "bfloat16" or "float16"'),
            ("precision_fp16", lambda c: c["precision"].update(autocast="float16"),
             "is false with fp16 autocast: fp16 gradients need a GradScaler"),
            ("scaler_bf16", lambda c: c["precision"].update(grad_scaler={"init_scale": 65536.0}),
             'is only judged with autocast "float16"'),
            ("scaler_growth", lambda c: c["precision"].update(autocast="float16", grad_scaler={
                "init_scale": 65536.0, "growth_factor": 3.0, "backoff_factor": 0.5, "growth_interval": 2000}),
             "growth_factor = 3.0: the judge checks GradScaler's default 2")):
        good, why = refused(args, base, name, lambda d, ch=change: J.edit_contract(d, ch), expect, DECLARATION_HINT)
        ok(good, why)
    return ok.verdict("declarations")


def case_neighbours(args):
    ok = T.Checks()
    base = J.record(os.path.join(args.work, "nb-base"), "ddp", 2)
    # A user's own files where the earlier judge wrote its own: left as they are.
    d = J.copy_recording(base, os.path.join(args.work, "nb-user-files"))
    mine = {n: f"the user's own {n}\n".encode() for n in ("summary.md", "report.html", "checksums.jsonl",
                                                          "gate.json", "first_divergence.json")}
    for n, b in mine.items():
        open(os.path.join(d, n), "wb").write(b)
    p = J.judge(args, d)
    ok(p.returncode == 0, f"user files: judge exited {p.returncode}")
    for n, b in mine.items():
        ok(T.read_bytes(os.path.join(d, n)) == b, f"the user's {n} was changed")
    ok("other files of the directory" in J.rows(d)["recording"]["measured"], J.rows(d)["recording"]["measured"])
    os.remove(J.judged(d, "report.html"))
    r = T.run([args.bin, "report", d])
    ok(r.returncode == 0 and os.path.exists(J.judged(d, "report.html")) and
       T.read_bytes(os.path.join(d, "report.html")) == mine["report.html"],
       f"`shardproof report DIR`: exit {r.returncode}; judge/report.html written, the user's report.html kept")
    # Two judges at once on one directory: neither refuses the other's temporary files.
    d2 = J.copy_recording(base, os.path.join(args.work, "nb-two-judges"))
    procs = [subprocess.Popen([args.bin, "judge", d2], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in (0, 1)]
    codes = [(pr.wait(600), pr.stderr.read().decode()[-300:]) for pr in procs]
    ok(all(c == 0 for c, _ in codes), f"two judges at once: {codes}")
    # Other bundles are named, with the command to use.
    proof = T.fresh(os.path.join(args.work, "nb-proof"), create=True)
    open(os.path.join(proof, "prove.json"), "w").write("{}")
    p = J.judge(args, proof)
    ok(p.returncode == 2 and "is a proof bundle" in p.stderr and "shardproof verify" in p.stderr,
       f"a proof bundle: exit {p.returncode}: {p.stderr.strip()}")
    run = T.fresh(os.path.join(args.work, "nb-run"), create=True)
    open(os.path.join(run, "contract.json"), "w").write('{"engine": {"version": "x"}, "hash": "0"}')
    p = J.judge(args, run)
    ok(p.returncode == 2 and "is a run of the engine" in p.stderr and "shardproof verify" in p.stderr,
       f"an engine run: exit {p.returncode}: {p.stderr.strip()}")
    hint = "judge only what a run recorded in full"

    def seal_names(path):
        def f(d):
            seal = T.read_json(os.path.join(d, "seal", "rank-00000.json"))
            seal["files"][path] = {"bytes": 1, "sha256": "0" * 64}
            open(os.path.join(d, "seal", "rank-00000.json"), "w").write(__import__("json").dumps(seal))
        return f

    def link_records(d):
        rel = "records/rank-00001.jsonl"
        shutil.move(os.path.join(d, rel), os.path.join(d, "elsewhere.jsonl"))
        os.symlink(os.path.join(d, "elsewhere.jsonl"), os.path.join(d, rel))

    def cut_trace(d):
        rel = "trace/rank-00001.jsonl"
        b = T.read_bytes(os.path.join(d, rel))
        open(os.path.join(d, rel), "wb").write(b[:-7])
        J.reseal(d, 1, rel)

    for name, edit, expect in (("seal_dotdot", seal_names("../outside.bin"), "'../outside.bin', not a path inside"),
                               ("seal_absolute", seal_names("/etc/passwd"), "'/etc/passwd', not a path inside"),
                               ("symlink_records", link_records, "records/rank-00001.jsonl is a symbolic link"),
                               ("trace_cut", cut_trace, "trace/rank-00001.jsonl ends mid-line")):
        good, why = refused(args, base, name, edit, expect, hint if name.startswith("seal") else None)
        ok(good, why)
    return ok.verdict("neighbours")


if __name__ == "__main__":
    sys.exit(J.main(globals(), __doc__))
