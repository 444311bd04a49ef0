"""Hugging Face model files end to end (docs/huggingface.md): config.json with --model-config, weights with
--init-from, `ckpt export --hf`, against files and a reader written here from the formats' own rules.

  roundtrip     Python writes an HF LLaMA directory (config.json, three BF16/F16/F32 shards, the index) from
                the safetensors spec; `train --model-config --init-from` starts from it (its step-0 checkpoint
                holds exactly the widened values), trains 2 steps; `ckpt export --hf` (F32 and BF16, sharded)
                passes the layout rules; importing the export and exporting again gives the same bytes.
  oracle        PyTorch loads the exported weights with its own reader and its own LLaMA forward
                (tests/oracle/llama_torch.py, float64) and matches the engine's loss of those files on a
                token batch (`shardproof grads --weights DIR`) within 1e-6 + 1e-5*|loss| (docs/equivalence.md).
  preset_equal  `train --preset tiny --model-config examples/deepspeed/config.json` is the preset's run bit for
                bit (checksums.jsonl byte-identical, verify → bitwise-equal); the contract records the file's
                SHA-256 and the key-by-key mapping; plan reads the same file.
  bad_input     malformed JSON, wrong types, refused keys, shapes that disagree with the weights (tensor and
                both shapes named), an index naming a missing shard, a truncated shard, a non-empty export
                directory: exit 2 with the message, and --out never created.
  bad_input_np2 the shape mismatch under mpirun -np 2: exit 2, the same message on both ranks.
Usage: hf_e2e.py CASE --bin shardproof --work DIR
"""
import hashlib
import json
import os
import re
import shutil
import struct
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import llama_torch as L  # noqa: E402
import sp_test as T  # noqa: E402
from sp_test import check  # noqa: E402

HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 32,
      "vocab_size": 2048, "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False,
      "hidden_act": "silu", "torch_dtype": "bfloat16", "bos_token_id": 1, "eos_token_id": 2}
TRAIN = ["--preset", "tiny", "--quiet", "--set", "train.seq_len=32", "--set", "train.eval_every=0",
         "--set", "train.eval_batches=2", "--set", "evidence.watchdog_seconds=60"]
SHARD = "100KB"  # the model is 0.6 MB in F32: several shards, and a tensor (embed, lm_head) larger than one
DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def engine_cfg(hf):
    """The oracle's model keys from an HF config.json (its own mapping, not the engine's)."""
    return dict(vocab_size=hf["vocab_size"], dim=hf["hidden_size"], n_layers=hf["num_hidden_layers"],
                n_heads=hf["num_attention_heads"], n_kv_heads=hf.get("num_key_value_heads", hf["num_attention_heads"]),
                ffn_dim=hf["intermediate_size"], max_seq=hf["max_position_embeddings"],
                rope_theta=hf.get("rope_theta", 10000.0), norm_eps=hf.get("rms_norm_eps", 1e-6),
                tie_embeddings=hf.get("tie_word_embeddings", False))


# ------------------------------------------------------------------------------------ safetensors from the spec

def st_bytes(tensors, metadata=None):
    """tensors: name -> (dtype name, torch tensor). 8-byte LE header length, JSON header, data in order."""
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dt, t) in tensors.items():
        b = t.to(DTYPES[dt][0]).contiguous().view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": dt, "shape": list(t.shape), "data_offsets": [off, off + len(b)]}
        off += len(b)
        blobs.append(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + b"".join(blobs)


def st_read(path):
    """name -> (dtype name, float64 tensor), metadata. Checks the spec's rules it relies on."""
    raw = T.read_bytes(path)
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    out, end = {}, 0
    for name, e in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        b, f = e["data_offsets"]
        check(b == end, f"{path}: {name} does not follow the previous tensor")
        dt, size = DTYPES[e["dtype"]]
        check(f - b == size * int(np.prod(e["shape"], dtype=np.int64)), f"{path}: {name} size")
        buf = bytearray(raw[8 + n + b:8 + n + f])
        out[name] = (e["dtype"], torch.frombuffer(buf, dtype=dt).reshape(e["shape"]).double()
                     if f > b else torch.zeros(e["shape"], dtype=torch.float64))
        end = f
    check(8 + n + end == len(raw), f"{path}: {len(raw) - 8 - n - end} bytes after the last tensor")
    return out, meta


def hf_read(d):
    """An HF model directory read by the rules of docs/formats/huggingface.md: name -> (dtype, float64)."""
    if os.path.exists(os.path.join(d, "model.safetensors")):
        check(not os.path.exists(os.path.join(d, "model.safetensors.index.json")), f"{d}: both layouts")
        t, meta = st_read(os.path.join(d, "model.safetensors"))
        check(meta.get("format") == "pt", meta)
        return t
    index = T.read_json(os.path.join(d, "model.safetensors.index.json"))
    check(set(index) == {"metadata", "weight_map"}, index.keys())
    files = sorted(set(index["weight_map"].values()))
    n = len(files)
    check(files == [f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)], files)
    out, total = {}, 0
    for f in files:
        t, meta = st_read(os.path.join(d, f))
        check(meta.get("format") == "pt", meta)
        for name, (dt, v) in t.items():
            check(index["weight_map"].get(name) == f, f"{name} in {f} but the index says {index['weight_map'].get(name)}")
            check(name not in out, f"{name} twice")
            out[name] = (dt, v)
            total += v.numel() * DTYPES[dt][1]
    check(set(out) == set(index["weight_map"]), "index and shards list different tensors")
    check(index["metadata"]["total_size"] == total, f"total_size {index['metadata']['total_size']} != {total}")
    return out


def write_source(d):
    """The starting model: HF config.json, three shards of BF16 matrices, F16 norms, F32 embedding; an index."""
    T.fresh(d, create=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(HF, f, indent=2)
    w = L.random_weights(engine_cfg(HF), seed=21)
    names = list(w)
    dt = {n: "F32" if "embed" in n else "F16" if n.endswith("norm.weight") else "BF16" for n in names}
    parts = [names[:1], names[1:10], names[10:]]
    weight_map, total = {}, 0
    for i, part in enumerate(parts, 1):
        f = f"model-{i:05d}-of-{len(parts):05d}.safetensors"
        with open(os.path.join(d, f), "wb") as out:
            out.write(st_bytes({n: (dt[n], w[n]) for n in part}, {"format": "pt"}))
        for n in part:
            weight_map[n] = f
            total += w[n].numel() * DTYPES[dt[n]][1]
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    # The values the engine must start from: each widened exactly from its stored dtype.
    return {n: w[n].to(DTYPES[dt[n]][0]).double() for n in names}


# ------------------------------------------------------------------------------------ driver

def args_():
    return T.case_args(["roundtrip", "oracle", "preset_equal", "bad_input", "bad_input_np2"])


ARGS = None


def work(*p):
    return os.path.join(ARGS.work, *p)


def sp(*a, expect=0, ranks=1, timeout=600):
    p = T.run(T.launch(ARGS.bin, ranks) + list(a), timeout=timeout)
    if expect is not None and p.returncode != expect:
        T.show(p, tail=4000)
        raise T.Failure(f"exit {p.returncode} (expected {expect}): {' '.join(a)}")
    return p


def files_of(d):
    return {f: T.read_bytes(os.path.join(d, f)) for f in sorted(os.listdir(d))}


def case_roundtrip():
    src = work("src")
    want = write_source(src)
    run_a = T.fresh(work("run_a"))
    p = sp("train", *TRAIN, "--model-config", os.path.join(src, "config.json"), "--init-from", src,
           "--set", "train.steps=2", "--checkpoint-at", "0", "--out", run_a)
    check("initialized from consolidated weights" in p.stderr, p.stderr[-2000:])
    contract = T.read_json(os.path.join(run_a, "contract.json"))
    mc = contract["config"]["model_config"]
    check(mc["sha256"] == hashlib.sha256(T.read_bytes(os.path.join(src, "config.json"))).hexdigest(), mc)
    check(mc["mapping"]["hidden_size"] == {"value": 64, "became": "model.dim"}, mc["mapping"]["hidden_size"])
    check(contract["config"]["data"]["vocab_size"] == 2048 and contract["config"]["model"]["dim"] == 64, contract)
    # Import exactness: the step-0 checkpoint, exported in F32, is the source widened exactly.
    e0 = T.fresh(work("e0"))
    sp("ckpt", "export", run_a, "--step", "0", "--hf", e0)
    got = hf_read(e0)
    check(set(got) == set(want), sorted(set(got) ^ set(want)))
    for n, v in want.items():
        check(got[n][0] == "F32" and torch.equal(got[n][1], v), f"{n}: imported values differ from the file's")
    for dtype in ("fp32", "bf16"):
        e1, e2, run_b = work(f"e1_{dtype}"), work(f"e2_{dtype}"), T.fresh(work(f"run_b_{dtype}"))
        T.fresh(e1), T.fresh(e2)
        sp("ckpt", "export", run_a, "--hf", e1, "--max-shard-size", SHARD, "--dtype", dtype)
        exported = hf_read(e1)
        check(set(exported) == set(want), "export lists other tensors")
        check(all(dt == ("F32" if dtype == "fp32" else "BF16") for dt, _ in exported.values()), "export dtype")
        for f, b in files_of(e1).items():
            if f.endswith(".safetensors"):
                n = struct.unpack("<Q", b[:8])[0]
                one = len(json.loads(b[8:8 + n])) == 2  # one tensor + __metadata__
                check(one or len(b) - 8 - n <= 100_000, f"{f}: {len(b) - 8 - n} bytes of tensors over {SHARD}")
        cfg = T.read_json(os.path.join(e1, "config.json"))
        check(cfg["torch_dtype"] == ("float32" if dtype == "fp32" else "bfloat16"), cfg)
        check({k: cfg[k] for k in HF if k not in ("torch_dtype", "bos_token_id", "eos_token_id")} ==
              {k: v for k, v in HF.items() if k not in ("torch_dtype", "bos_token_id", "eos_token_id")}, cfg)
        # Import the export, take its step-0 state, export again: the same bytes, every file.
        sp("train", *TRAIN, "--model-config", os.path.join(e1, "config.json"), "--init-from", e1,
           "--set", "train.steps=1", "--checkpoint-at", "0", "--out", run_b)
        sp("ckpt", "export", run_b, "--step", "0", "--hf", e2, "--max-shard-size", SHARD, "--dtype", dtype)
        a, b = files_of(e1), files_of(e2)
        check(list(a) == list(b), f"{list(a)} vs {list(b)}")
        for f in a:
            check(a[f] == b[f], f"{dtype}: {f} differs after import → export")
        print(f"{dtype}: {len(a)} files byte-identical after import → export: {', '.join(a)}")


def case_oracle():
    g = torch.Generator().manual_seed(5)
    tokens = torch.randint(0, HF["vocab_size"], (2, 33), generator=g)
    tp = work("oracle_tokens.bin")
    L.write_token_batch(tp, tokens.numpy())
    worst = 0.0
    for dtype in ("fp32", "bf16"):
        d = work(f"e1_{dtype}")
        hf = T.read_json(os.path.join(d, "config.json"))
        cfg = engine_cfg(hf)
        w = {n: v for n, (_, v) in hf_read(d).items()}  # float64 copies of the stored values
        ref = L.forward_loss(cfg, w, tokens).item()
        ref32 = L.forward_loss(cfg, {n: v.float() for n, v in w.items()}, tokens).item()
        cp, gp = work(f"oracle_{dtype}.json"), work(f"oracle_{dtype}.grads.safetensors")
        with open(cp, "w") as f:
            json.dump(cfg, f)
        sp("grads", "--config", cp, "--weights", d, "--tokens", tp, "--out", gp)
        _, meta = st_read(gp)
        loss = float(meta["loss"])
        err = abs(loss - ref)
        worst = max(worst, err)
        ok = err <= 1e-6 + 1e-5 * abs(ref)
        print(f"{dtype}: engine loss {loss:.9f}, torch float64 {ref:.9f} (float32 {ref32:.9f}), |diff| {err:.2e}",
              "ok" if ok else "MISMATCH")
        check(ok, f"{dtype}: engine loss {loss} vs PyTorch {ref}")


def case_preset_equal():
    cfg = T.source_dir("examples", "deepspeed", "config.json")
    steps = ["--set", "train.steps=2", "--set", "train.eval_batches=0", "--quiet"]
    a, b = T.fresh(work("preset")), T.fresh(work("preset_hf"))
    sp("train", "--preset", "tiny", *steps, "--out", a)
    sp("train", "--preset", "tiny", "--model-config", cfg, *steps, "--out", b)
    ca, cb = (T.read_bytes(os.path.join(d, "checksums.jsonl")) for d in (a, b))
    check(len(ca) > 0 and ca == cb, "checksums.jsonl differ between the preset and its HF config.json")
    v = sp("verify", b, "--against", a)
    check("bitwise-equal" in v.stdout, v.stdout[-2000:])
    ka, kb = (T.read_json(os.path.join(d, "contract.json"))["config"] for d in (a, b))
    check(ka["model"] == kb["model"] and ka["data"] == kb["data"], "model or data sections differ")
    mc = kb["model_config"]
    check(mc["file"] == os.path.realpath(cfg) or mc["file"] == os.path.abspath(cfg), mc["file"])
    check(mc["sha256"] == hashlib.sha256(T.read_bytes(cfg)).hexdigest(), mc["sha256"])
    check(mc["mapping"]["num_key_value_heads"] == {"value": 4, "became": "model.n_kv_heads"}, mc["mapping"])
    check(mc["mapping"]["rope_theta"] == {"value": 10000.0, "became": "model.rope_theta"}, mc["mapping"])
    check("ignored" in mc["mapping"]["torch_dtype"], mc["mapping"]["torch_dtype"])
    check("model_config" not in ka, "a preset run records no model_config")
    # The planner reads the same file: alone (the shape) and as the [model] of the preset.
    p = sp("plan", "--cluster", "dgx-a100", "--model-config", cfg)
    check("L 4, C 256, H 8, KV 4, F 688, V 2048" in p.stdout, p.stdout)
    wide = work("wide_config.json")
    with open(wide, "w") as f:
        json.dump(dict(T.read_json(cfg), hidden_size=512, intermediate_size=1376), f)
    p = sp("plan", "--cluster", "dgx-a100", "--model", "tiny", "--model-config", wide, "--dp", "8", "--global-batch",
           "64", "--json")
    m = json.loads(p.stdout)["inputs"]["model"]
    check((m["dim"], m["ffn_dim"], m["n_layers"], m["vocab_size"]) == (512, 1376, 4, 2048), m)
    print("tiny preset == --model-config examples/deepspeed/config.json: checksums byte-identical, bitwise-equal")


def expect_usage_error(args, needles, out=None, ranks=1):
    p = sp(*args, expect=2, ranks=ranks)
    for n in needles:
        check(n in p.stderr, f"{n!r} not in:\n{p.stderr[-3000:]}")
    if out is not None:
        check(not os.path.exists(out), f"{out} was created")
    return p


def case_bad_input():
    src = work("src")
    out = T.fresh(work("bad_out"))
    bad = T.fresh(work("bad"), create=True)

    def cfg_file(name, text):
        path = os.path.join(bad, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    train = lambda *a: ["train", *TRAIN, "--out", out, *a]  # noqa: E731
    expect_usage_error(train("--model-config", cfg_file("malformed.json", '{"hidden_size": 64,')),
                       ["malformed.json is not valid JSON"], out)
    wrong = dict(HF, hidden_size="64", rms_norm_eps=[1e-5])
    expect_usage_error(train("--model-config", cfg_file("types.json", json.dumps(wrong))),
                       ['"hidden_size" = "64" must be a positive integer', '"rms_norm_eps" = [1e-05] must be a positive'],
                       out)
    refused = dict(HF, rope_scaling={"rope_type": "linear", "factor": 2.0}, attention_bias=True, sliding_window=8)
    expect_usage_error(train("--model-config", cfg_file("refused.json", json.dumps(refused))),
                       ['"rope_scaling" = ', "is refused: RoPE scaling", '"attention_bias" = true is refused',
                        'unknown key "sliding_window"'], out)
    # A config whose shapes disagree with the weights: the tensor and both shapes.
    other = cfg_file("ffn96.json", json.dumps(dict(HF, intermediate_size=96)))
    expect_usage_error(train("--model-config", other, "--init-from", os.path.join(src, "model.safetensors.index.json")),
                       ["tensor 'model.layers.0.mlp.gate_proj.weight' has shape (128, 64) in 'model-00002-of-00003",
                        "but the model needs (96, 64)"], out)
    # An index naming a missing shard; a truncated shard.
    for kind in ("missing", "truncated"):
        d = T.fresh(os.path.join(bad, kind))
        shutil.copytree(src, d)
        shard = os.path.join(d, "model-00003-of-00003.safetensors")
        if kind == "missing":
            os.remove(shard)
            needles = ["names shard 'model-00003-of-00003.safetensors'", "does not exist"]
        else:
            with open(shard, "r+b") as f:
                f.truncate(os.path.getsize(shard) - 1)
            needles = ["model-00003-of-00003.safetensors"]
        expect_usage_error(train("--model-config", os.path.join(d, "config.json"), "--init-from", d), needles, out)
    # A non-empty export directory is never replaced unasked.
    keep = T.fresh(os.path.join(bad, "keep"), create=True)
    with open(os.path.join(keep, "mine.txt"), "w") as f:
        f.write("mine")
    expect_usage_error(["ckpt", "export", work("run_a"), "--hf", keep], ["is not empty"])
    check(os.listdir(keep) == ["mine.txt"], os.listdir(keep))
    expect_usage_error(["ckpt", "export", work("run_a"), "--hf", T.fresh(os.path.join(bad, "x")), "--max-shard-size",
                        "5XB"], ["--max-shard-size '5XB' is not a size"])
    # The other commands read --model-config through the same loader.
    for cmd in (["prove", "--out", os.path.join(bad, "p")], ["compare", "--strategies", "dp1", "--out",
                                                              os.path.join(bad, "c")],
                ["plan", "--cluster", "dgx-a100", "--model", "tiny"]):
        expect_usage_error(cmd + ["--model-config", os.path.join(bad, "types.json")],
                           ['"hidden_size" = "64" must be a positive integer'])


def case_bad_input_np2():
    out = T.fresh(work("bad_out_np2"))
    other = os.path.join(work("bad"), "ffn96_np2.json")
    os.makedirs(work("bad"), exist_ok=True)
    with open(other, "w") as f:
        json.dump(dict(HF, intermediate_size=96), f)
    p = expect_usage_error(["train", *TRAIN, "--set", "parallel.dp=2", "--out", out, "--model-config", other,
                            "--init-from", work("src")],
                           ["but the model needs (96, 64)"], out, ranks=2)
    lines = [re.sub(r"^\[r\d+[^\]]*\] ", "", ln) for ln in p.stderr.splitlines() if "error:" in ln]
    check(len(lines) == 2 and lines[0] == lines[1], f"expected the same error on both ranks:\n{p.stderr[-3000:]}")
    print("both ranks:", lines[0][:160])


def main():
    global ARGS
    ARGS = args_()
    os.makedirs(ARGS.work, exist_ok=True)
    sys.exit(T.run_case(ARGS.case, globals()["case_" + ARGS.case]))


if __name__ == "__main__":
    main()
