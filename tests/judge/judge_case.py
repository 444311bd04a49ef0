#!/usr/bin/python3
"""`shardproof judge` on PyTorch runs recorded with python/shardproof_torch (docs/judge.md).

Cases (CASE --bin shardproof --work DIR):
  recorder        the recorder refuses a name, shape or rank the config and grid do not have, a second
                  recording into one directory, a resume under another contract, a collective it cannot record
  digest          the recorder's partial checksums, merged from row and column shards, equal the engine's record
                  of the same tensor bit for bit (`judge --summarize`), special values included
  strategies_a/b  single, ddp, zero1 / tp, pp, dp-tp recorded for 3 steps: PASS, every view checking something
  resume          ddp stopped after step 1, resumed in new processes: PASS with the resume row required
  bugs_a/b        the planted real-world bugs of examples/torch/train_llama.py: each FAILs at the expected view,
                  step and (where it has one) tensor and rank
  bad_input       a recording that is incomplete, from another model, edited or missing a rank is refused
                  (exit 2) naming the file and record, and nothing is judged (no gate.json)
  desync          a rank whose trace misses a collective (resealed): FAIL at collectives naming that rank
  sensitivity     an anchored gradient scaled by 1 + 4 tolerances FAILs there naming the tensor; by 1 + 1/4 passes
  long            every strategy over 24 steps (and ddp resumed at 12): PASS, zero false alarms (label long)
"""
import hashlib
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

sys.path.insert(0, T.source_dir("python"))
EXAMPLE = T.source_dir("examples", "torch", "train_llama.py")
PY = "/usr/bin/python3"

# bug → (strategy, expected view, step, tensor or group substring or None, ranks or None)
BUGS = {
    "ddp-bucket-skipped": ("ddp", "traffic", 1, "dp[tp0.pp0]", [0, 1]),
    "no-sync-last": ("ddp", "traffic", 0, "dp[tp0.pp0]", [0, 1]),
    "loss-per-microbatch": ("ddp", "loss", 0, "loss", [0]),
    "tp-norm-unreduced": ("tp", "replicas", 0, "model.layers.0.input_layernorm.weight", [0, 1]),
    "clip-one-tp-rank": ("tp", "update", 0, "grad_norm", [0, 1]),
    "zero-shard-stale": ("zero1", "update", 0, None, None),
    "pp-label-swap": ("pp", "loss", 0, "loss", [1]),
    "resume-no-optimizer": ("ddp", "resume", 1, "model.embed_tokens.weight", [0]),
    "decay-norms": ("ddp", "update", 0, "layernorm", [0]),
}


def record(out, strategy, steps, *extra, world=None):
    T.fresh(out)
    shutil.rmtree(out + ".ckpt", ignore_errors=True)
    cmd = [PY, EXAMPLE, "--strategy", strategy, "--steps", str(steps), "--out", out, "--quiet"] + list(extra)
    if world:
        cmd += ["--world", str(world)]
    T.run_ok(cmd, timeout=600)
    return out


def judge(args, d):
    return T.run([args.bin, "judge", d], timeout=600)


def gate(d):
    return T.read_json(os.path.join(d, "gate.json"))


def first(d):
    return T.read_json(os.path.join(d, "first_divergence.json"))["first"]


def report_data(d):
    """The data report.html embeds (docs/formats/report_data.md): the JSON of its sp-data element."""
    html = open(os.path.join(d, "report.html")).read()
    tag = '<script type="application/json" id="sp-data">'
    start = html.index(tag) + len(tag)
    return json.loads(html[start:html.index("</script>", start)])


def check_page(args, d, ok, verdict):
    """report.html drawn by headless Chromium (tests/report/headless.py): no console error, no network request,
    the verdict and one row per view. Skipped, saying so, where there is no Chromium."""
    sys.path.insert(0, T.source_dir("tests", "report"))
    import headless
    if not os.path.exists(headless.CHROMIUM):
        print(f"report.html not drawn: no {headless.CHROMIUM}")
        return
    with headless.Browser(T.fresh(os.path.join(args.work, "chromium"), create=True)) as b:
        page = b.open("file://" + os.path.abspath(os.path.join(d, "report.html")))
        rows = page.eval("document.querySelectorAll('#judge-views tr[data-view]').length")
        shown = page.eval("document.querySelector('[data-verdict]').getAttribute('data-verdict')")
        ok(page.errors == [] and page.network_requests() == [] and rows == 7 and shown == verdict,
           f"{d}/report.html: errors {page.errors}, requests {page.network_requests()}, {rows} view rows, "
           f"verdict {shown}")
        # The traffic view names the gate's row that compares it, and its outcome; never a red "no prediction"
        # next to a passing row (issue 45).
        red = page.eval("[...document.querySelectorAll('#view-traffic .sp-error')].map(e => e.textContent)")
        said = page.eval("(() => { const e = document.querySelector('#view-traffic [data-prediction-elsewhere]'); "
                         "return e ? e.textContent : null; })()")
        row = next(c for c in gate(d)["criteria"] if c["name"].startswith("traffic"))
        ok(not any("no prediction" in t for t in red) and said is not None and
           (": pass" if row["passed"] else ": FAIL") in said and row["name"] in said,
           f"{d}/report.html's traffic view: red {red}, says {said!r}, gate row {row['name']} {row['passed']}")


def reseal(d, rank, rel):
    """Puts the edited file `rel` back into rank's seal (as someone who edits a recording would)."""
    p = os.path.join(d, "seal", f"rank-{rank:05d}.json")
    seal = T.read_json(p)
    path = os.path.join(d, rel)
    if os.path.exists(path):
        seal["files"][rel] = {"bytes": os.path.getsize(path),
                              "sha256": hashlib.sha256(T.read_bytes(path)).hexdigest()}
    else:
        seal["files"].pop(rel, None)
    with open(p, "w") as f:
        json.dump(seal, f, indent=2, sort_keys=True)


# ------------------------------------------------------------------------------------ cases

def case_digest(args):
    import numpy as np
    from shardproof_torch import checksum, files
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((48, 60)) * np.exp(rng.uniform(-30, 30, (48, 60)))).astype(np.float32)
    a.flat[:8] = np.array([0.0, -0.0, 1e-45, -3e-42, np.inf, -np.inf, np.nan, 3.4e38], dtype=np.float32)
    b = rng.standard_normal((96, 32)).astype(np.float32)
    c = np.full((7,), 1.0, dtype=np.float32)
    # Wide range without a dominating outlier: values below a chunk's 2^24 window change the rounded sum and l2.
    d = (rng.standard_normal((48, 60)) * np.exp(rng.uniform(-30, 30, (48, 60)))).astype(np.float32)
    tensors = {"a": a, "b": b, "c": c, "d": d}
    path = os.path.join(T.fresh(os.path.join(args.work, "digest"), create=True), "t.safetensors")
    with open(path, "wb") as f:
        f.write(files.safetensors_bytes(list(tensors.items())))
    p = T.run_ok([args.bin, "judge", "--summarize", path])
    engine = {r["tensor"]: r for r in (json.loads(line) for line in p.stdout.splitlines() if line.strip())}
    ok = T.Checks()
    for name, x in tensors.items():
        shape = list(x.shape)
        for shard in ([None] if x.ndim == 1 else [None, (0, 0, 2), (1, 0, 3 if x.shape[1] % 3 == 0 else 4)]):
            parts = 1 if shard is None else shard[2]
            total = checksum.Partial()
            for i in range(parts):
                s = None if shard is None else (shard[0], i, parts)
                piece = x if s is None else np.split(x, parts, axis=s[0])[i]
                flat = np.ascontiguousarray(piece).reshape(-1)
                cut = flat.size // 3  # two ranks covering one piece, as replicas do
                for k0, k1 in ((0, cut), (cut, flat.size)):
                    total.merge(checksum.partial_of(flat[k0:k1], checksum.shard_indices(shape, s, k0)))
            e = engine[name]
            got = {"digest": total.digest(), "count": total.count, "nonfinite": total.nan + total.inf,
                   "absmax": total.absmax(), "sum": total.exact_sum(), "l2": total.exact_l2()}
            for k, v in got.items():
                want = e[k]
                same = (want is None and v != v) or want == v
                ok(same, f"{name} as {shard}: {k} {v!r} from the recorder's partials, the engine's {want!r}")
    # The negative twin: one flipped bit changes the digest.
    a2 = a.copy()
    a2.view(np.uint32)[3, 3] ^= 1
    flipped = checksum.partial_of(a2.reshape(-1), checksum.contiguous_indices(0)).digest()
    ok(flipped != engine["a"]["digest"], "a flipped bit left the digest unchanged")
    return ok.verdict("digest")


def case_recorder(args):
    """The recorder's own refusals, before it writes anything: a name the config.json does not have, a shape
    that is not the config's piece, a rank outside the grid, an existing recording, a resume under another
    contract; and the trace refuses a collective it cannot record."""
    import torch
    import torch.distributed as dist
    from shardproof_torch import Recorder
    from shardproof_torch.trace import UnsupportedCollective
    ok = T.Checks()
    cfg = {"vocab_size": 32, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1,
           "num_attention_heads": 2, "num_key_value_heads": 2, "max_position_embeddings": 8}
    hyper = {"lr_schedule": "constant", "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1, "no_decay": [],
             "max_grad_norm": 1.0, "implementation": "torch.optim.AdamW"}
    base = dict(strategy={"name": "single", "dp": 1, "tp": 1, "pp": 1}, hf_config=cfg, optimizer=None, hyper=hyper,
                batch={"micro_batch": 1, "micro_batches": 1, "seq_len": 4}, steps=2)

    def refused(name, expect, **kw):
        out = T.fresh(os.path.join(args.work, "recorder-" + name))
        a = dict(base, rank=0, parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)])
        a.update(kw)
        try:
            Recorder(out, **a).finish()
        except (ValueError, FileExistsError) as e:
            return ok(expect in str(e), f"{name}: the recorder said '{e}', expected '{expect}'")
        return ok(False, f"{name}: the recorder accepted it")

    refused("unknown_name", "not a tensor of a LLaMA model",
            parameters=[("model.layers.0.attn.weight", torch.nn.Parameter(torch.ones(16)), None)])
    refused("wrong_shape", "has shape [8]", parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(8)), None)])
    refused("wrong_piece", "its shard (0, 0, 2) give [16, 16]",
            parameters=[("model.embed_tokens.weight", torch.nn.Parameter(torch.ones(32, 16)), (0, 0, 2))])
    refused("rank_outside", "outside the declared world", rank=3)
    refused("hyper", "missing ['eps']", hyper={k: v for k, v in hyper.items() if k != "eps"})
    out = os.path.join(args.work, "recorder-twice")
    T.fresh(out)
    Recorder(out, rank=0, parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)], **base).finish()
    try:
        Recorder(out, rank=0, parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)], **base)
        ok(False, "a second recording into the same directory was accepted")
    except FileExistsError as e:
        ok("record into a new directory" in str(e), f"twice: {e}")
    try:
        Recorder(out, rank=0, parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)],
                 resume_step=1, **dict(base, steps=3))
        ok(False, "a resume under another contract was accepted")
    except ValueError as e:
        ok("another contract" in str(e) and "steps" in str(e), f"resume: {e}")
    out = T.fresh(os.path.join(args.work, "recorder-refuse-op"))
    rec = Recorder(out, rank=0, parameters=[("model.norm.weight", torch.nn.Parameter(torch.ones(16)), None)], **base)
    try:
        dist.all_to_all([torch.ones(1)], [torch.ones(1)])
        ok(False, "all_to_all was not refused")
    except UnsupportedCollective as e:
        ok("all_to_all is not recorded" in str(e), f"all_to_all: {e}")
    rec.finish()
    return ok.verdict("recorder")


def strategies(args, names, steps=3, extra=()):
    ok = T.Checks()
    for st in names:
        d = record(os.path.join(args.work, f"ok-{st}-{steps}"), st, steps, *extra)
        p = judge(args, d)
        if not ok(p.returncode == 0, f"{st}: judge exited {p.returncode}, not 0 (PASS)"):
            T.show(p, 3000)
            continue
        g = gate(d)
        rows = {c["name"]: c for c in g["criteria"]}
        ok(g["verdict"] == "PASS", f"{st}: gate.json says {g['verdict']}")
        ok(first(d) is None, f"{st}: a first divergence in a correct run: {first(d)}")
        grads = rows["anchored gradients equal the engine's single-device gradient"]["measured"]
        ok(grads.startswith(f"{steps} anchors × 21 tensors"), f"{st}: anchored gradients measured '{grads}'")
        traffic = rows["traffic equals the model of the declared strategy"]["measured"]
        ok(st == "single" or not traffic.startswith("0 cells"), f"{st}: traffic compared nothing: {traffic}")
        data = report_data(d)
        ok(data.get("kind") == "judge" and [v["id"] for v in data["views"]] == ["gate", "judge", "traffic"] and
           data["views"][0]["data"]["verdict"] == "PASS" and not data["problems"],
           f"{st}: report.html's data: kind {data.get('kind')}, views {[v['id'] for v in data.get('views', [])]}, "
           f"problems {data.get('problems')}")
        ok(os.path.exists(os.path.join(d, "checksums.jsonl")), f"{st}: no assembled checksums.jsonl")
        upd = rows["anchored update equals the engine's AdamW"]["measured"]
        loss = rows["loss and its reduction equal the single-device training"]["measured"]
        print(f"{st}: PASS; gradients: {grads}; update: {upd}; loss: {loss}; traffic: {traffic}")
    return ok


def case_strategies_a(args):
    return strategies(args, ["single", "ddp", "zero1"]).verdict("strategies_a")


def case_strategies_b(args):
    ok = strategies(args, ["tp", "pp", "dp-tp"])
    check_page(args, os.path.join(args.work, "ok-dp-tp-3"), ok, "PASS")
    return ok.verdict("strategies_b")


def case_resume(args):
    ok = T.Checks()
    d = record(os.path.join(args.work, "resume-ok"), "ddp", 3, "--resume-at", "1")
    p = judge(args, d)
    ok(p.returncode == 0, f"resumed ddp: judge exited {p.returncode}")
    row = [c for c in gate(d)["criteria"] if c["name"].startswith("resume")][0]
    ok(row["required"] and row["passed"], f"resume row: {row}")
    ok("2 rank resumes" in row["measured"], f"resume row measured '{row['measured']}'")
    return ok.verdict("resume")


def bugs(args, names):
    ok = T.Checks()
    for bug in names:
        st, view, step, tensor, ranks = BUGS[bug]
        extra = ["--bug", bug] + (["--resume-at", "1"] if bug == "resume-no-optimizer" else [])
        d = record(os.path.join(args.work, f"bug-{bug}"), st, 2, *extra)
        p = judge(args, d)
        if not ok(p.returncode == 1, f"{bug}: judge exited {p.returncode}, not 1 (FAIL)"):
            T.show(p, 3000)
            continue
        f = first(d)
        print(f"{bug}: {T.read_json(os.path.join(d, 'first_divergence.json'))['line']}")
        ok(f["view"] == view and f["step"] == step, f"{bug}: first divergence {f['view']} at step {f['step']}, "
                                                    f"expected {view} at step {step}")
        if tensor:
            ok(tensor in f["tensor"], f"{bug}: names '{f['tensor']}', expected '{tensor}'")
        if ranks is not None:
            ok(f["ranks"] == ranks, f"{bug}: names ranks {f['ranks']}, expected {ranks}")
        if bug == "zero-shard-stale":  # the shard's owner is rank 1 (its moments come from there)
            ok(1 in f["ranks"] and f["tensor"].startswith("model."), f"{bug}: names {f['tensor']} on {f['ranks']}")
    return ok


def case_bugs_a(args):
    return bugs(args, ["ddp-bucket-skipped", "no-sync-last", "loss-per-microbatch", "resume-no-optimizer",
                       "decay-norms"]).verdict("bugs_a")


def case_bugs_b(args):
    ok = bugs(args, ["tp-norm-unreduced", "clip-one-tp-rank", "zero-shard-stale", "pp-label-swap"])
    check_page(args, os.path.join(args.work, "bug-tp-norm-unreduced"), ok, "FAIL")
    return ok.verdict("bugs_b")


def refused(args, base, name, edit, expect):
    d = os.path.join(args.work, "bad-" + name)
    T.fresh(d)
    shutil.copytree(base, d, ignore=shutil.ignore_patterns("gate.json", "summary.md", "report.html",
                                                           "checksums.jsonl", "first_divergence.json"))
    edit(d)
    p = judge(args, d)
    msg = p.stderr + p.stdout
    good = p.returncode == 2 and expect in msg and not os.path.exists(os.path.join(d, "gate.json"))
    print(("ok   " if good else "FAIL ") + f"{name}: exit {p.returncode}: {msg.strip()[:300]}")
    return good, f"{name}: expected exit 2 naming '{expect}', got {p.returncode}: {msg.strip()[:400]}"


def case_bad_input(args):
    ok = T.Checks()
    one = record(os.path.join(args.work, "bad-base-1"), "single", 2)
    two = record(os.path.join(args.work, "bad-base-2"), "ddp", 2)

    def drop_line(rel, pred):
        def f(d):
            lines = open(os.path.join(d, rel)).read().splitlines(keepends=True)
            open(os.path.join(d, rel), "w").write("".join(x for x in lines if not pred(json.loads(x))))
            reseal(d, 0, rel)
        return f

    def append(rel, text, seal=True):
        def f(d):
            with open(os.path.join(d, rel), "a") as fh:
                fh.write(text)
            if seal:
                reseal(d, 0, rel)
        return f

    def other_model(d):
        c = T.read_json(os.path.join(d, "contract.json"))
        c["model"]["intermediate_size"] = 192
        body = dict(c)
        body.pop("hash")
        c["hash"] = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        open(os.path.join(d, "contract.json"), "w").write(json.dumps(c, indent=2, sort_keys=True) + "\n")
        reseal(d, 0, "contract.json")

    def contract_edited(d):
        c = T.read_json(os.path.join(d, "contract.json"))
        c["optimizer"]["weight_decay"] = 0.0
        open(os.path.join(d, "contract.json"), "w").write(json.dumps(c, indent=2, sort_keys=True) + "\n")
        reseal(d, 0, "contract.json")

    def remove(rel, rank=0, seal=True):
        def f(d):
            os.remove(os.path.join(d, rel))
            if seal:
                reseal(d, rank, rel)
        return f

    def targets_wrong(d):
        rel = "tokens/rank-00000/step-000001.bin"
        b = bytearray(T.read_bytes(os.path.join(d, rel)))
        b[24 + 4 * 5:24 + 4 * 6] = (-1).to_bytes(4, "little", signed=True)  # a target becomes padding
        open(os.path.join(d, rel), "wb").write(bytes(b))
        reseal(d, 0, rel)

    cases = [
        (one, "no_seal", remove("seal/rank-00000.json", seal=False), "seal/rank-00000.json is missing"),
        (one, "edited_unsealed", append("records/rank-00000.jsonl", "\n", seal=False), "records/rank-00000.jsonl"),
        (one, "extra_file", lambda d: open(os.path.join(d, "notes.txt"), "w").write("x"),
         "notes.txt is in no rank's seal"),
        (one, "missing_step", drop_line("records/rank-00000.jsonl", lambda r: r["kind"] == "step" and r["step"] == 1),
         "no step record for step 1"),
        (one, "missing_tensor",
         drop_line("records/rank-00000.jsonl", lambda r: r["kind"] == "tensor" and r["step"] == 1 and
                   r["phase"] == "grad" and r["tensor"] == "model.norm.weight"), "lacks model.norm.weight"),
        (one, "torn_record", append("records/rank-00000.jsonl", '{"kind": "step", "st'), "records/rank-00000.jsonl:"),
        (one, "other_model", other_model, "another model"),
        (one, "contract_edited", contract_edited, "the contract was edited"),
        (one, "anchor_missing", remove("anchors/step-000001/rank-00000.safetensors"), "anchor step 1"),
        (one, "tokens_disagree", targets_wrong, "micro-batch 0"),
        (two, "missing_rank", lambda d: [os.remove(os.path.join(d, "seal", "rank-00001.json")),
                                         os.remove(os.path.join(d, "records", "rank-00001.jsonl"))],
         "rank 1 never finished"),
    ]
    for base, name, edit, expect in cases:
        good, why = refused(args, base, name, edit, expect)
        ok(good, why)
    p = T.run([args.bin, "judge", os.path.join(args.work, "no-such-dir")])
    ok(p.returncode == 2, f"a missing directory: exit {p.returncode}")
    return ok.verdict("bad_input")


def case_desync(args):
    ok = T.Checks()
    d = record(os.path.join(args.work, "desync"), "ddp", 2, "--micro-batches", "3", world=3)
    rel = "trace/rank-00002.jsonl"
    lines = open(os.path.join(d, rel)).read().splitlines(keepends=True)
    open(os.path.join(d, rel), "w").write("".join(lines[:-1]))  # rank 2 never issued its last collective
    reseal(d, 2, rel)
    p = judge(args, d)
    ok(p.returncode == 1, f"desync: judge exited {p.returncode}")
    f = first(d)
    print(T.read_json(os.path.join(d, "first_divergence.json"))["line"])
    ok(f["view"] == "collectives" and f["ranks"] == [2], f"desync: first divergence {f}")
    return ok.verdict("desync")


def case_sensitivity(args):
    """The gradient view's sharpness: one anchored gradient scaled by 1 + 4 x its derived tolerance (resealed)
    must FAIL there, naming the tensor; scaled by 1 + tolerance / 4 (four times inside), the view passes."""
    import struct
    import numpy as np
    ok = T.Checks()
    base = record(os.path.join(args.work, "sense-base"), "single", 1)
    T.run_ok([args.bin, "judge", base])
    # docs/equivalence.md §7, recomputed here: (sqrt(R K) + T) u sqrt(N), R = 19 L + 6, K the longest reduction
    # (the example's model: max(dim 64, 2 ffn 256, seq 16, (H + 2 KV) D 128) = 256), N the step's targets.
    steps = [r for r in T.read_jsonl(os.path.join(base, "records", "rank-00000.jsonl")) if r["kind"] == "step"]
    n = sum(l["targets"] for l in steps[0]["losses"])
    grad_tol = ((19 * 2 + 6) * 256) ** 0.5 + 16
    grad_tol *= 2.0 ** -24 * n ** 0.5
    rel = "anchors/step-000000/rank-00000.safetensors"
    for factor, fails in ((4.0, True), (0.25, False)):
        d = os.path.join(args.work, f"sense-{factor}")
        T.fresh(d)
        shutil.copytree(base, d)
        raw = bytearray(T.read_bytes(os.path.join(d, rel)))
        (n,) = struct.unpack("<Q", raw[:8])
        entry = json.loads(raw[8:8 + n])["grad/model.layers.1.mlp.up_proj.weight"]
        b0, b1 = (8 + n + x for x in entry["data_offsets"])
        g = np.frombuffer(bytes(raw[b0:b1]), dtype=np.float32) * np.float32(1 + factor * grad_tol)
        raw[b0:b1] = g.astype(np.float32).tobytes()
        open(os.path.join(d, rel), "wb").write(bytes(raw))
        reseal(d, 0, rel)
        p = judge(args, d)
        grads = [c for c in gate(d)["criteria"] if c["name"].startswith("anchored gradients")][0]
        print(f"x(1 + {factor} tol): judge exit {p.returncode}; {grads['measured']}")
        ok(grads["passed"] != fails, f"scaled by 1 + {factor} x tolerance: gradients row passed = {grads['passed']}")
        if fails:
            f = first(d)
            ok(f["view"] == "gradients" and f["tensor"] == "model.layers.1.mlp.up_proj.weight" and f["step"] == 0,
               f"scaled gradient: first divergence {f}")
    return ok.verdict("sensitivity")


def case_long(args):
    ok = strategies(args, ["single", "ddp", "zero1", "tp", "pp", "dp-tp"], steps=24)
    d = record(os.path.join(args.work, "long-resume"), "ddp", 24, "--resume-at", "12")
    ok(judge(args, d).returncode == 0, "ddp resumed at step 12 of 24: not PASS")
    return ok.verdict("long")


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}

if __name__ == "__main__":
    a = T.case_args(sorted(CASES), __doc__)
    os.makedirs(a.work, exist_ok=True)
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    sys.exit(CASES[a.case](a))
