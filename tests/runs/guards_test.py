"""No command deletes or rewrites what it did not write, and sizes that overflow are refused (issue 31, items
5-8, 11 and 13), end to end through `shardproof train / plan / report / ckpt export` with real MPI ranks:

  export_overwrite   `ckpt export --hf DIR --overwrite` replaces a previous export only: a directory holding
                     anything else, the run being exported and a sealed bundle are refused, nothing removed
  symlink_sealed     `train --out LINK`, LINK a symlink to a stage of a sealed proof bundle: refused (with and
                     without --overwrite), every sealed file unchanged
  out_guards         `plan --out` and `report --out` into a sealed bundle, a run directory, a symlink to one, or
                     a file inside one: refused, nothing written; a plan directory and the run's own page: written
  big_model          hidden_size 2^31 (`--set model.dim`, `--model-config`): exit 2 naming the key, in `train`
                     (no MPI_ABORT, no lock file or --out left) and in `plan` (no SIGABRT)
  messages           issue 31's messages: a mistyped command, `config show` of a refused configuration, a NUL in a
                     key, servers without a parameter server, a fault step past the run, a step never saved, a
                     symlink-loop shard, a tensor missing from an HF index, a half-written sources.json, an empty
                     corpus: each names the thing and the fix
  precision_convert  `train.precision = "fp16"` alone runs with DeepSpeed's loss-scaling defaults, recorded in the
                     contract; `--convert-precision` resumes an fp16 checkpoint in bf16 and a bf16 one in fp16
Each case takes a few seconds on 2 cores. Usage: guards_test.py CASE --bin shardproof --work DIR
"""
import hashlib
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

SMALL_SETS = ["model.dim=64", "model.n_heads=4", "model.n_kv_heads=2", "model.ffn_dim=128", "model.max_seq=32",
              "train.seq_len=32", "train.steps=4", "train.eval_every=0", "train.eval_batches=2"]
SMALL = ["--preset", "tiny", "--quiet"] + T.sets(SMALL_SETS)
ARGS = None
check = T.check


def work(*parts):
    return os.path.join(ARGS.work, *parts)


def sp(*args, ranks=1):
    return T.run(T.launch(ARGS.bin, ranks) + list(args), timeout=300)


def train(out, *extra, sets=()):
    return sp("train", "--out", out, *SMALL, *extra, *T.sets(sets))


def expect(p, code, *patterns):
    text = p.stdout + p.stderr
    check(p.returncode == code, f"exit {p.returncode}, expected {code}:\n{text[-3000:]}")
    for pat in patterns:
        check(re.search(pat, text), f"output lacks /{pat}/:\n{text[-3000:]}")
    return text


def tree(path):
    """Every file under `path` (symlinks followed at the top) with its SHA-256: what must not change."""
    out = {}
    for d, _, names in os.walk(os.path.realpath(path)):
        for n in names:
            p = os.path.join(d, n)
            out[os.path.relpath(p, os.path.realpath(path))] = hashlib.sha256(T.read_bytes(p)).hexdigest()
    return out


def checkpointed_run(out):
    """A 4-step run stopped after 2 steps with a committed checkpoint: resumable."""
    expect(train(T.fresh(out), "--stop-after", "2", sets=["evidence.checkpoint_every=2"]), 0)
    return out


def seal(bundle):
    """bundle.sha256 over every file, as `prove` writes it: the directory is now a sealed proof bundle."""
    entries = sorted(tree(bundle).items())
    with open(os.path.join(bundle, "bundle.sha256"), "w") as f:
        f.write("".join(f"{h}  {rel}\n" for rel, h in entries))


def sealed_bundle(name):
    """A directory holding a run as its `parallel/` stage, then sealed."""
    b = T.fresh(work(name), create=True)
    checkpointed_run(os.path.join(b, "parallel"))
    seal(b)
    return b


def case_export_overwrite():
    run = checkpointed_run(work("run"))
    hf = T.fresh(work("hf"))
    expect(sp("ckpt", "export", run, "--hf", hf), 0)
    expect(sp("ckpt", "export", run, "--hf", hf), 2, "exists and is not empty", "--overwrite")
    expect(sp("ckpt", "export", run, "--hf", hf, "--overwrite"), 0)  # a previous export: replaced
    # Anything else is refused and left as it was.
    with open(os.path.join(hf, "notes.txt"), "w") as f:
        f.write("mine\n")
    before = tree(hf)
    expect(sp("ckpt", "export", run, "--hf", hf, "--overwrite"), 2, r"holds an entry an HF export does not write "
           r"\('notes\.txt'\)", "nothing was removed")
    check(tree(hf) == before, "a refused export changed the directory")
    before = tree(run)
    expect(sp("ckpt", "export", run, "--hf", run, "--overwrite"), 2, r"lies in the run directory")
    check(tree(run) == before, "exporting into the run itself changed it")
    bundle = sealed_bundle("export_bundle")
    before = tree(bundle)
    expect(sp("ckpt", "export", run, "--hf", bundle, "--overwrite"), 2, r"lies in a sealed proof bundle")
    expect(sp("ckpt", "export", run, "--hf", os.path.join(bundle, "hf")), 2, r"lies in a sealed proof bundle")
    expect(sp("ckpt", "export", run, "--out", os.path.join(bundle, "w.safetensors")), 2, "sealed proof bundle")
    check(tree(bundle) == before, "a refused export changed the sealed bundle")


def case_symlink_sealed():
    bundle = sealed_bundle("bundle")
    before = tree(bundle)
    link = work("link")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(os.path.join(bundle, "parallel"), link)
    for extra in ((), ("--overwrite",)):
        expect(train(link, *extra, sets=["evidence.checkpoint_every=2"]), 2, r"inside a sealed proof bundle",
               "never written to")
    check(tree(bundle) == before, "a run through a symlink changed the sealed bundle")


def case_out_guards():
    run = checkpointed_run(work("guard_run"))
    other = checkpointed_run(work("guard_other"))
    bundle = sealed_bundle("guard_bundle")
    link = work("guard_link")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(bundle, link)
    trees = {d: tree(d) for d in (run, other, bundle)}
    plan = ["plan", "--model", T.source_dir("configs", "tiny.toml"), "--cluster", "dgx-a100", "--nodes", "1", "--dp",
            "8", "--global-batch", "16"]
    for out in (bundle, os.path.join(bundle, "parallel"), link, other, os.path.join(other, "trace")):
        expect(sp(*plan, "--out", out), 2, r"--out '.*' (\(= '.*'\) )?lies in (a sealed proof bundle|the run dir)")
    for out in (os.path.join(bundle, "report.html"), os.path.join(link, "parallel", "report.html"),
                os.path.join(other, "report.html")):
        expect(sp("report", run, "--out", out), 2, r"lies in (a sealed proof bundle|the run directory)")
    for d, t in trees.items():
        check(tree(d) == t, f"a refused --out changed {d}")
    expect(sp(*plan, "--out", T.fresh(work("guard_plan"))), 0)  # a plan directory of its own
    expect(sp(*plan, "--out", work("guard_plan")), 0)  # written again
    expect(sp("report", run), 0, "report: .*report.html")  # the run's own page
    expect(sp("report", run, "--out", work("guard_page.html")), 0)


def case_big_model():
    # hidden_size 2^31: refused like a model too big for the machine, never an overflow check.
    out = T.fresh(work("big"))
    for ranks in (1, 2):
        text = expect(sp("train", "--out", out, *SMALL, *T.sets(["model.dim=2147483648", f"parallel.dp={ranks}"]),
                         ranks=ranks), 2, r"model\.dim = 2147483648", "parameters, more than the 2\\^48")
        check("MPI_ABORT" not in text and "check failed" not in text, f"an overflow check fired:\n{text[-2000:]}")
        check(not os.path.exists(out), "--out was created by a refused run")
    cfg = work("big_config.json")
    with open(cfg, "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2 ** 31,
                   "intermediate_size": 688, "num_attention_heads": 8, "num_key_value_heads": 4,
                   "num_hidden_layers": 4, "vocab_size": 2048, "max_position_embeddings": 128}, f)
    text = expect(sp("plan", "--model-config", cfg, "--cluster", "dgx-a100", "--nodes", "1", "--dp", "8",
                     "--global-batch", "16"), 2,
                  r'"hidden_size" = 2147483648')
    check("check failed" not in text, text[-2000:])
    expect(sp("train", "--out", out, *SMALL, "--model-config", cfg), 2, r'"hidden_size" = 2147483648')
    check(not os.path.exists(out), "--out was created by a refused run")
    # A vocabulary the tokenizer cannot have: the key named, no lock file left behind.
    expect(train(out, sets=["data.vocab_size=100"]), 2, r"data\.vocab_size: vocab_size 100")
    check(not os.path.exists(out), "--out was created by a refused run")


def case_precision_convert():
    f16, b16 = T.fresh(work("fp16")), T.fresh(work("bf16"))
    expect(train(f16, "--stop-after", "2", sets=["train.precision=fp16", "evidence.checkpoint_every=2"]), 0)
    scaling = T.read_json(os.path.join(f16, "contract.json"))["config"].get("fp16")
    check(scaling == {"initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2,
                      "consecutive_hysteresis": False, "min_loss_scale": 1.0},
          f"fp16 alone: the contract records {scaling}, not DeepSpeed's defaults")
    expect(train(b16, "--stop-after", "2", sets=["train.precision=bf16", "evidence.checkpoint_every=2"]), 0)
    # Each resumed in the other 16-bit precision: refused without the flag, continued with it.
    for run, other in ((f16, "bf16"), (b16, "fp16")):
        expect(train(run, sets=[f"train.precision={other}", "evidence.checkpoint_every=2"]), 1,
               "was saved in precision", "--convert-precision")
        expect(train(run, "--convert-precision", sets=[f"train.precision={other}", "evidence.checkpoint_every=2"]), 0,
               "done: 4 steps")


def case_messages():
    """Issue 31 **Messages**: each names the file, key or byte and the fix."""
    expect(sp("trian"), 2, "unknown command 'trian'", "did you mean 'train'")
    # config show: what train refuses is refused after the configuration is shown (never exit 0).
    expect(sp("config", "show", *SMALL[:2], *T.sets(["parallel.dp=3"])), 2, "`train` refuses this configuration",
           "not divisible")
    # An invisible NUL in a ds_config key is shown escaped.
    ds = work("nul_ds.json")
    with open(ds, "w") as f:
        f.write('{"train_batch_size": 8, "train_micro_batch_size_per_gpu\\u0000": 2}')
    expect(sp("config", "show", "--deepspeed", ds, "--np", "2"), 2, r"train_micro_batch_size_per_gpu\\x00")
    # parallel.servers without a parameter server: the world size is the grid's.
    text = expect(train(T.fresh(work("servers")), sets=["parallel.servers=1"]), 2, r"parallel\.servers = 1 needs")
    check("world size" not in text, f"one rank is the world of a dp 1 x tp 1 x pp 1 all-reduce run:\n{text}")
    # A fault step past the run: the hint is about steps.
    expect(train(T.fresh(work("f999")), "--fault", "stale-grad@999"), 2, r"step 999 ≥ train.steps = 4",
           r"stale-grad@STEP with STEP in 0 … 3")
    # A step never saved is not "moved or deleted".
    run = checkpointed_run(work("msg_run"))
    text = expect(sp("ckpt", "export", run, "--step", "5", "--out", work("w5.safetensors")), 1,
                  "holds no checkpoint of step 5: the run saved step\\(s\\) 2")
    check("moved or deleted" not in text, text)
    # The HF index: a symlink-loop shard, and a tensor missing from the index and the shards.
    hf = T.fresh(work("msg_hf"))
    expect(sp("ckpt", "export", run, "--hf", hf, "--max-shard-size", "40KB"), 0)
    shards = sorted(n for n in os.listdir(hf) if n.startswith("model-"))
    check(len(shards) > 2, f"the export was not sharded: {shards}")
    loop = os.path.join(hf, shards[1])
    os.remove(loop)
    os.symlink(loop, loop)
    expect(sp("ckpt", "import", hf, *SMALL[:2], *T.sets(SMALL_SETS)), 2, "symbolic link that leads to no file")
    hf = T.fresh(work("msg_hf2"))
    expect(sp("ckpt", "export", run, "--hf", hf, "--max-shard-size", "40KB"), 0)
    index = T.read_json(os.path.join(hf, "model.safetensors.index.json"))
    files = [f for f in index["weight_map"].values()]
    gone = next(t for t, f in index["weight_map"].items() if files.count(f) == 1)  # alone in its shard
    del index["weight_map"][gone]  # so that shard is not read at all: only total_size still counts it
    with open(os.path.join(hf, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    expect(sp("ckpt", "import", hf, *SMALL[:2], *T.sets(SMALL_SETS)), 2, "total_size", f"missing tensor '{gone}'")
    # A half-written sources.json names where it breaks off; an empty corpus names the file and its size.
    src = T.fresh(work("msg_sources"), create=True)
    with open(T.source_dir("data", "sources.json")) as f:
        half = f.read()[:300]
    with open(os.path.join(src, "half.json"), "w") as f:
        f.write(half)
    expect(sp("data", "prepare", "--sources", os.path.join(src, "half.json"), "--out", os.path.join(src, "o1")), 2,
           r"half\.json: not valid JSON at byte \d+.*line \d+, column \d+")
    open(os.path.join(src, "empty.txt"), "w").close()
    with open(os.path.join(src, "empty.json"), "w") as f:
        json.dump({"format": "shardproof-sources", "version": 1, "sources": [
            {"id": "e", "title": "empty", "path": "empty.txt", "sha256": hashlib.sha256(b"").hexdigest(),
             "format": "whole_file", "language": "en", "licence": "CC0-1.0", "origin": {"registry": "test"}}]}, f)
    expect(sp("data", "prepare", "--sources", os.path.join(src, "empty.json"), "--out", os.path.join(src, "o2")), 1,
           r"corpus file '.*empty\.txt' \(source 'e' of '.*empty\.json'\) holds no document: 0 bytes")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    global ARGS
    ARGS = T.case_args(sorted(CASES))
    os.makedirs(ARGS.work, exist_ok=True)
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    t0 = time.time()
    rc = T.run_case(ARGS.case, CASES[ARGS.case])
    print(f"{ARGS.case}: {time.time() - t0:.1f} s")
    sys.exit(rc)


if __name__ == "__main__":
    main()
