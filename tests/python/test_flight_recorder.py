"""PyTorch's Flight Recorder as the collective trace (python/shardproof_torch/flight_recorder.py): examples/hf_ddp on
2 gloo ranks with `--trace flight-recorder` is recorded, its dumps converted and judged PASS, the traffic view
comparing bytes per step and group and naming what a dump lacks; dumps edited after the run (a size changed, a record
deleted, a sequence id skipped, a record missing on one rank, another version, not a dump, a sealed file changed)
are refused naming the file and the record; DDP's bucket 1 never all-reduced FAILs the traffic view through the
converted trace."""
import json
import os
import pickle
import shutil
import subprocess
import sys

import pytest

ROOT = os.environ.get("SP_SOURCE_DIR") or os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("SP_BIN") or os.path.join(ROOT, "build", "bin", "shardproof")
EXAMPLE = os.path.join(ROOT, "examples", "hf_ddp", "train.py")
TRAFFIC = "traffic equals the model of the recorded layout"
STEPS = 3


def env():
    return dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=os.path.join(ROOT, "python"))


def record(out, *extra):
    subprocess.run([sys.executable, EXAMPLE, "--steps", str(STEPS), "--out", out, "--quiet",
                    "--trace", "flight-recorder", *extra], check=True, env=env(), timeout=900)


def convert(out, *extra):
    return subprocess.run([sys.executable, "-m", "shardproof_torch.flight_recorder", out, *extra],
                          capture_output=True, text=True, env=env(), timeout=300)


def judge(out):
    judged = subprocess.run([BIN, "judge", out], capture_output=True, text=True, timeout=600)
    gate = None
    if os.path.exists(os.path.join(out, "judge", "gate.json")):
        with open(os.path.join(out, "judge", "gate.json")) as f:
            gate = json.load(f)
    return judged, gate


def rows(gate):
    return {c["name"]: c for c in gate["criteria"]}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("fr") / "run")
    record(out)
    return out


def test_unconverted_recording_is_refused(run, tmp_path):
    out = str(tmp_path / "run")
    shutil.copytree(run, out)
    judged, _ = judge(out)
    assert judged.returncode == 2, judged.stdout + judged.stderr
    assert "trace/rank-00000.jsonl is missing" in judged.stderr and "shardproof_torch.flight_recorder" in judged.stderr


def test_flight_recorder_trace_is_judged(run, tmp_path):
    out = str(tmp_path / "run")
    shutil.copytree(run, out)
    c = convert(out)
    assert c.returncode == 0, c.stderr
    assert "trace/rank-00001.jsonl" in c.stdout
    with open(os.path.join(out, "trace", "rank-00000.jsonl")) as f:
        recs = [json.loads(x) for x in f]
    # DDP's gradient all-reduces of every step, with no phase, micro-batch or digest (what a dump lacks)
    in_steps = [r for r in recs if r["step"] >= 0 and r["phase"] == "unknown"]
    assert {r["step"] for r in in_steps} == set(range(STEPS)) and all(r["op"] == "all_reduce" for r in in_steps)
    assert all(r["micro_batch"] == -1 and "in_digest" not in r and "reduce" not in r for r in recs)
    judged, gate = judge(out)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    r = rows(gate)
    assert gate["verdict"] == "PASS" and all(c["passed"] or not c["required"] for c in r.values()), r
    traffic = r[TRAFFIC]["measured"]
    assert f"{STEPS} cells of {STEPS} steps equal" in traffic, traffic
    assert "NOT compared: the trace is a Flight Recorder dump" in traffic, traffic
    assert "payload digests NOT compared" in r["collectives consistent across ranks"]["measured"]


# ---------------------------------------------------------------- edited dumps: refused naming the record
def load_dumps(run):
    dumps = []
    for r in (0, 1):
        with open(os.path.join(run, "flight_recorder", f"rank-{r:05d}.pkl"), "rb") as f:
            dumps.append(pickle.load(f))
    return dumps


def convert_edited(run, base, edit):
    """The run's dumps, edited, written as torch names its own (<prefix><rank>) and converted with --dumps: the
    converter's result and the edited dumps."""
    base.mkdir()
    dumps = load_dumps(run)
    edit(dumps)
    folder = base / "dumps"
    folder.mkdir()
    for r, dump in enumerate(dumps):
        with open(folder / f"fr_trace_rank_{r}", "wb") as f:
            pickle.dump(dump, f)
    out = str(base / "run")
    shutil.copytree(run, out)
    return convert(out, "--dumps", str(folder)), dumps, out


def refused(run, base, edit):
    c, dumps, out = convert_edited(run, base, edit)
    assert c.returncode == 2, c.stdout + c.stderr
    assert not os.path.exists(os.path.join(out, "trace", "rank-00000.jsonl"))
    return c.stderr, dumps


def all_reduces(dump):
    return [e for e in dump["entries"] if e["profiling_name"].endswith("all_reduce")]


def test_unedited_dumps_convert(run, tmp_path):
    c, _, _ = convert_edited(run, tmp_path / "a", lambda dumps: None)
    assert c.returncode == 0, c.stderr


def shrink(e, both=True):
    e["input_sizes"] = [[e["input_sizes"][0][0] - 8]]
    if both:
        e["output_sizes"] = [[e["output_sizes"][0][0] - 8]]


def test_size_changed_is_refused(run, tmp_path):
    msg, dumps = refused(run, tmp_path / "a", lambda d: shrink(all_reduces(d[1])[2]))
    e = all_reduces(dumps[1])[2]
    assert f"fr_trace_rank_1: record {e['record_id']} (group dp[tp0.pp0], collective_seq_id " \
           f"{e['collective_seq_id']}): count" in msg and "the members disagree" in msg, msg
    # the input only: the op itself is contradicted
    msg, dumps = refused(run, tmp_path / "b", lambda d: shrink(all_reduces(d[0])[2], both=False))
    e = all_reduces(dumps[0])[2]
    assert f"fr_trace_rank_0: record {e['record_id']}: all_reduce of input sizes" in msg, msg


def test_record_deleted_is_refused(run, tmp_path):
    gone = []
    msg, dumps = refused(run, tmp_path / "a",
                         lambda d: gone.append(d[0]["entries"].pop(d[0]["entries"].index(all_reduces(d[0])[3]))))
    nxt = next(e for e in dumps[0]["entries"] if e["record_id"] > gone[0]["record_id"])
    assert f"fr_trace_rank_0: record {nxt['record_id']} (group dp[tp0.pp0]): collective_seq_id " \
           f"{nxt['collective_seq_id']} follows {gone[0]['collective_seq_id'] - 1}" in msg and "missing" in msg, msg


def test_sequence_id_skipped_is_refused(run, tmp_path):
    def skip(d):
        first = all_reduces(d[1])[1]
        for e in d[1]["entries"][d[1]["entries"].index(first):]:
            e["collective_seq_id"] += 1
    msg, dumps = refused(run, tmp_path / "a", skip)
    e = all_reduces(dumps[1])[1]
    assert f"fr_trace_rank_1: record {e['record_id']} (group dp[tp0.pp0]): collective_seq_id " \
           f"{e['collective_seq_id']} follows {e['collective_seq_id'] - 2}" in msg, msg


def test_record_missing_on_one_rank_is_refused(run, tmp_path):
    msg, dumps = refused(run, tmp_path / "a", lambda d: d[1]["entries"].pop())
    last = dumps[0]["entries"][-1]
    assert f"fr_trace_rank_1: group dp[tp0.pp0] has no collective_seq_id {last['collective_seq_id']}, which " \
           f"{tmp_path / 'a' / 'dumps' / 'fr_trace_rank_0'} record {last['record_id']}" in msg \
        and "missing on this rank" in msg, msg


def test_other_version_and_not_a_dump_are_refused(run, tmp_path):
    msg, _ = refused(run, tmp_path / "a", lambda d: d[0].update(version="3.0"))
    assert "fr_trace_rank_0: Flight Recorder dump version '3.0'" in msg, msg
    msg, _ = refused(run, tmp_path / "b", lambda d: d.__setitem__(1, {"entries": []}))
    assert "fr_trace_rank_1: not a Flight Recorder dump" in msg, msg


def test_sealed_dump_edited_is_refused(run, tmp_path):
    """An edit that keeps the dumps consistent (both ranks' size changed) is still not what the ranks sealed."""
    out = str(tmp_path / "run")
    shutil.copytree(run, out)
    for r in (0, 1):
        path = os.path.join(out, "flight_recorder", f"rank-{r:05d}.pkl")
        with open(path, "rb") as f:
            dump = pickle.load(f)
        shrink(all_reduces(dump)[2])
        with open(path, "wb") as f:
            pickle.dump(dump, f)
    c = convert(out)
    assert c.returncode == 2 and "flight_recorder/rank-00000.pkl: not the file rank 0 sealed" in c.stderr, c.stderr


# ---------------------------------------------------------------- a planted bug, seen through the converted trace
def test_skipped_bucket_fails_traffic(tmp_path):
    out = str(tmp_path / "bug")
    record(out, "--bug", "ddp-bucket-skipped")
    c = convert(out)
    assert c.returncode == 0, c.stderr
    judged, gate = judge(out)
    assert judged.returncode == 1, judged.stdout + judged.stderr
    t = rows(gate)[TRAFFIC]
    assert not t["passed"], t
    # DDP reduces step 0 as one bucket; bucket 1 exists, and is skipped, from step 1
    assert "step 1 all phases on dp[tp0.pp0]:" in t["detail"] and "bytes traced, the model of" in t["detail"], t
