"""`shardproof report` in a real browser (docs/report.md): headless Chromium (Debian's, headless.py) loads
the report.html that prove / compare wrote and must find no console error, make no network request,
show every view, and show the bundle's own numbers, which this test reads from the bundle's files
independently of the report code (gate.json, first_divergence.json, ledger.json, trace/, timeline/,
comm_predicted.json, metrics.jsonl, checksums.jsonl, checkpoints/, compare.json). A screenshot of
every view is written under the case's work directory for a person to look at.

proof_pass:  prove (pp 2, pp-microbatch-swap) → every view; verify PASS; a report whose data were edited
             fails verify naming report.html, and `report DIR` restores it; a copy of the bundle without
             parallel/ledger.json: `report` exits 1 naming it, and the page says so in its memory view.
proof_fail:  prove --no-recovery (dp 2, skip-grad-allreduce) → verdict FAIL in the page, the recovery
             criteria failed, the fault run's traffic differs from its prediction; the report edited to
             show PASS fails verify naming report.html.
proof_tp:    prove (tp 2, drop-tp-allreduce: a configuration promised within tolerance, verified by anchored
             replays) → the fault read as its anchored replay against the reference within the single-step
             tolerances (the highlighted record is the first one out of them), the anchored parallel replay
             in class, the free-running drift curve equal to drift.json; verify PASS; a report whose drift
             was edited fails verify naming the value.
compare:     compare dp2,pp2-1f1b,tp2 → the strategies side by side and each strategy's loss curve.
plan:        plan --out (one configuration with pp 2, and a --search) → the plan views with plan.json's own
             numbers (step split adding up to the step, memory per rank and category, traffic cells, links,
             one Gantt interval per simulated action ending at the simulated pipeline); `report DIR` rewrites the
             same page; a plan.json of another format is named by the page and the exit code.
bad_input:   not a directory, not a bundle (exit 2 naming what was looked for; with --out a page that
             says so, drawn without error).
lab:         LSL-D's bundle: the lab header, its observations linked to views, no schedule for a run without a
             pipeline.
fault_ended: a PASS whose fault stage ended with exit 1 (desync-extra-collective): that end is information under
             the verdict, not a warning.
Usage: report_test.py CASE --bin shardproof --work DIR
"""
import argparse
import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402
from headless import CHROMIUM, Browser  # noqa: E402

# The small model of tests/faults/prove_case.py: each protocol (5 mpirun launches) takes seconds.
SMALL = ["model.dim=128", "model.ffn_dim=344", "model.n_layers=4", "model.max_seq=64", "train.seq_len=64",
         "train.steps=6", "train.eval_every=3", "train.eval_batches=2", "train.warmup_steps=1", "train.lr=5e-3",
         "prove.checkpoint_step=3", "prove.eval_margin=0.25"]
PROOF_VIEWS = {"gate", "divergence", "pipeline", "time", "memory", "traffic", "curves", "checkpoints"}
# The kinds of a step's split in timeline/ (core/time_split.h kTimeKindNames, then "other").
TIME_KINDS = ["gemm", "attention", "memory_bound", "comm", "wait", "optimizer", "evidence", "other"]
check = T.Checks()  # soft checks: every failed expectation printed, the verdict at the end
failures = check.failures
load, jsonl, sets = T.read_json, T.read_jsonl, T.sets


run = functools.partial(T.run, echo=True)


def prove(args, out, fault, extra_sets, extra=()):
    """The bundle at `out`, made by `prove` here, or with --bundle the one the faults suite made with the same
    fault, topology and SMALL settings (tests/faults/prove_case.py; ctest fixtures): its `prove` exit code is
    read back from its gate (0 PASS, 1 FAIL) and the faults test has checked its last line."""
    if args.bundle:
        fault_json = load(os.path.join(args.bundle, "prove.json"))
        check(fault_json["fault"].startswith(fault.split("@")[0]), f"--bundle {args.bundle} is not a {fault} proof")
        verdict = load(os.path.join(args.bundle, "gate.json"))["verdict"]
        return subprocess.CompletedProcess([], 0 if verdict == "PASS" else 1,
                                           f"report: {args.bundle}/report.html\n", ""), args.bundle
    shutil.rmtree(out, ignore_errors=True)
    p = run([args.bin, "prove", "--out", out, "--fault", fault, "--quiet"] + sets(SMALL + extra_sets) + list(extra))
    print(p.stdout[-2500:])
    print(p.stderr[-2000:], file=sys.stderr)
    return p, out


# ---- the bundle, read independently of src/report ----

def trace_records(run_dir):
    recs = {}
    for f in sorted(glob.glob(os.path.join(run_dir, "trace", "rank-*.jsonl"))):
        rank = int(re.search(r"rank-(\d+)\.jsonl", f).group(1))
        recs[rank] = [r for r in jsonl(f) if not r.get("timed_out") and not r.get("aborted")]
    return recs


def traffic_by_group_phase(run_dir):
    out = {}
    for rank, recs in trace_records(run_dir).items():
        for r in recs:
            k = (r["group"], r["phase"])
            out[k] = out.get(k, 0) + r["bytes"]
    return out


def step_class(s, sched):
    """docs/formats/comm_predicted.md: the class of step s (independent of the engine's StepSchedule)."""
    if s == -1:
        return "initial_eval"
    c = "step"
    if sched["checksum_every"] > 0 and s % sched["checksum_every"] == 0:
        c += "+checksums"
    if (sched["eval_every"] > 0 and (s + 1) % sched["eval_every"] == 0) or s + 1 == sched["steps"]:
        c += "+eval"
    return c


def predicted_by_group_phase(run_dir):
    """comm_predicted.json summed over ranks and every step from the first traced one to the rank's last
    traced step, each step by its class; phases setup/checkpoint are not predicted."""
    traced = {rank: [r["step"] for r in recs if r["phase"] not in ("setup", "checkpoint")]
              for rank, recs in trace_records(run_dir).items()}
    first = min(s for steps in traced.values() for s in steps)
    doc = load(os.path.join(run_dir, "comm_predicted.json"))
    sched = doc["schedule"]
    out = {}
    for rank in doc["ranks"]:  # a run that stopped early: up to the last step this rank traced
        last = max(traced.get(rank["rank"], []), default=first - 1)
        for step in range(first, min(last + 1, sched["steps"])):
            for g, phases in rank["classes"][step_class(step, sched)].items():
                for ph, v in phases.items():
                    if ph in ("setup", "checkpoint"):
                        continue
                    out[(g, ph)] = out.get((g, ph), 0) + v["bytes"]
    return out


def peer_matrix(run_dir, world):
    """p2p: send/isend bytes from sender to peer; collectives: each rank's wire bytes over its group's other members."""
    p2p = [[0] * world for _ in range(world)]
    coll = [[0] * world for _ in range(world)]
    members, wire = {}, {}
    for rank, recs in trace_records(run_dir).items():
        for r in recs:
            if r["op"] in ("send", "isend"):
                p2p[rank][r["peer_world"]] += r["bytes"]
            elif r["op"] not in ("recv", "irecv"):
                members.setdefault(r["group"], set()).add(rank)
                wire[(rank, r["group"])] = wire.get((rank, r["group"]), 0) + r["wire_bytes"]
    for (rank, g), w in wire.items():
        m = members[g]
        if len(m) < 2:
            continue
        for peer in m:
            if peer != rank:
                coll[rank][peer] += w // (len(m) - 1)
    return p2p, coll


def first_differing_record(run_file, ref_file, bitwise):
    """The first record of run_file (file order) whose bits differ from the reference's (bitwise), and its
    relative L2 (or loss) difference."""
    ref = {(r["step"], r["phase"], r["tensor"]): r for r in jsonl(ref_file)}
    for r in jsonl(run_file):
        w = ref.get((r["step"], r["phase"], r["tensor"]))
        if w is None:
            continue
        if r["phase"] == "loss":
            same, got, want = r["bits"] == w["bits"], r["value"], w["value"]
        else:
            same, got, want = r["digest"] == w["digest"], r["l2"], w["l2"]
        if not same:
            assert bitwise, "only the bitwise reading is checked here"
            return r["step"], r["phase"], r["tensor"], abs(got - want) / max(abs(want), 1e-30)
    return None


def first_out_of_tolerance(run_file, ref_file, tol):
    """The first record of run_file (file order) outside the single-step tolerances of an anchored replay
    (docs/equivalence.md: tol = {loss, param, grad}; a statistic leaves them when its difference exceeds
    tol·|L2| (sum: tol·|L2|·√numel)), and its relative L2 (or loss) difference."""
    ref = {(r["step"], r["phase"], r["tensor"]): r for r in jsonl(ref_file)}
    for r in jsonl(run_file):
        w = ref.get((r["step"], r["phase"], r["tensor"]))
        if w is None:
            continue
        if r["phase"] == "loss":
            if r["bits"] != w["bits"] and abs(r["value"] - w["value"]) > tol["loss"] * abs(w["value"]):
                return r["step"], r["phase"], r["tensor"], abs(r["value"] - w["value"]) / max(abs(w["value"]), 1e-30)
            continue
        if r["digest"] == w["digest"]:
            continue
        bound = tol[r["phase"]] * abs(w["l2"])
        if (r["nonfinite"] != w["nonfinite"] or abs(r["l2"] - w["l2"]) > bound or abs(r["absmax"] - w["absmax"]) > bound
                or abs(r["sum"] - w["sum"]) > bound * r["numel"] ** 0.5):
            return r["step"], r["phase"], r["tensor"], abs(r["l2"] - w["l2"]) / max(abs(w["l2"]), 1e-30)
    return None


def close(a, b, rel=1e-12):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-300)


# ---- page checks ----

def open_page(browser, path):
    page = browser.open("file://" + os.path.abspath(path))
    check(page.errors == [], f"{path}: console errors / exceptions: {page.errors}")
    requests = page.network_requests()
    check(requests == [], f"{path}: network requests: {requests}")
    return page


def check_views(page, want, shots_dir):
    got = page.eval("[...document.querySelectorAll('section.sp-view')].map(s => s.dataset.view)")
    check(set(got) == set(want), f"views {got}, expected {sorted(want)}")
    for v in got:
        bad = page.eval(f"[...document.querySelectorAll('#view-{v} .sp-error')].map(e => e.textContent)")
        check(bad == [], f"view {v} could not be drawn: {bad}")
        src = page.eval(f"document.querySelector('#view-{v} .sp-source code') !== null")
        check(src, f"view {v} does not name the file it comes from")
        os.makedirs(shots_dir, exist_ok=True)
        page.screenshot_element(f"#view-{v}", os.path.join(shots_dir, f"{v}.png"))
    return got


def rows(page, selector, attrs):
    """For each element matching selector: each attribute, from the element or else its first descendant having it."""
    def get(a):
        q = json.dumps("[" + a + "]")
        return f"(e.hasAttribute({json.dumps(a)}) ? e.getAttribute({json.dumps(a)}) : " \
               f"(e.querySelector({q}) ? e.querySelector({q}).getAttribute({json.dumps(a)}) : null))"
    js = (f"[...document.querySelectorAll({json.dumps(selector)})].map(e => ({{"
          + ", ".join(f"{json.dumps(a)}: {get(a)}" for a in attrs) + "}))")
    return page.eval(js)


def chart_datasets(page, canvas_selector):
    return page.eval(f"""(() => {{ const c = Chart.getChart(document.querySelector({json.dumps(canvas_selector)}));
        return c ? c.data.datasets.map(d => ({{label: d.label, data: d.data}})) : null; }})()""")


def check_gate(page, bundle):
    gate = load(os.path.join(bundle, "gate.json"))
    verdict = page.eval("document.querySelector('[data-verdict]').getAttribute('data-verdict')")
    check(verdict == gate["verdict"], f"verdict in the page {verdict}, gate.json {gate['verdict']}")
    shown = {r["data-criterion"]: r["data-passed"] == "true"
             for r in rows(page, "#gate-criteria tr[data-criterion]", ["data-criterion", "data-passed"])}
    want = {c["name"]: c["passed"] for c in gate["criteria"]}
    check(shown == want, f"gate criteria in the page {shown} != gate.json {want}")
    summary = open(os.path.join(bundle, "summary.md")).read()
    line = page.eval("document.querySelector('[data-first-divergence]').textContent")
    check(("- " + line + "\n") in summary, f"first-divergence line {line!r} is not summary.md's")
    check("report.html" in summary, "summary.md does not link report.html")
    return gate


def check_divergence(page, bundle, prove_json):
    fd = load(os.path.join(bundle, "first_divergence.json"))
    shown = rows(page, "#divergence-views tr[data-view]", ["data-view", "data-found", "data-step"])
    want = [(v["view"], v["found"], v.get("step")) for v in fd["views"]]
    got = [(r["data-view"], r["data-found"] == "true", int(r["data-step"]) if r["data-step"] else None) for r in shown]
    check(got == want, f"detections in the page {got} != first_divergence.json {want}")
    step = int(prove_json["fault"].split("@")[1].split(":")[0])
    injected = page.eval("document.querySelector('[data-injected-step]').getAttribute('data-injected-step')")
    check(int(injected) == step, f"injected step {injected}, prove.json {step}")
    par_bitwise = first_differing_record(os.path.join(bundle, "parallel", "checksums.jsonl"),
                                         os.path.join(bundle, "reference", "checksums.jsonl"), True) is None
    check(par_bitwise, "the parallel run is expected bitwise-equal to the reference in this case")
    first = first_differing_record(os.path.join(bundle, "fault", "checksums.jsonl"),
                                   os.path.join(bundle, "reference", "checksums.jsonl"), True)
    ds = check_first_marked(page, first)
    line = [d for d in ds if d["label"].startswith("fault injected")]
    check(len(line) == 1 and line[0]["data"][0]["x"] == step, f"no marker at the injected step {step}: {line}")


def check_first_marked(page, first):
    """The divergence chart highlights `first` (step, phase, tensor, rel), the record the test found in the
    files; returns the chart's datasets."""
    ds = chart_datasets(page, "#divergence-chart")
    marked = [d for d in ds if d["label"].startswith("first divergent record")]
    if check(first is not None and len(marked) == 1, f"first divergent record: {first}, marked in the chart: {marked}"):
        pt = marked[0]["data"][0]
        check(pt["x"] == first[0] and close(pt["y"], first[3]) and first[2] in marked[0]["label"],
              f"chart marks {marked[0]}, the files give step {first[0]} {first[1]} {first[2]} rel {first[3]}")
    return ds


def check_pipeline(page, run_dir):
    contract = load(os.path.join(run_dir, "contract.json"))["config"]
    topo = load(os.path.join(run_dir, "topology.json"))
    pp = contract["parallel"]["pp"]
    m = contract["train"]["global_batch"] // contract["train"]["micro_batch_size"] // contract["parallel"]["dp"]
    theory = (pp - 1) / (m + pp - 1)
    got = float(page.eval("document.querySelector('[data-bubble-theory]').getAttribute('data-bubble-theory')"))
    check(close(got, theory), f"bubble theory {got}, (p-1)/(m+p-1) = {theory}")
    step = int(page.eval("document.querySelector('#pipeline-step').value"))
    timelines = {int(re.search(r"rank-(\d+)", f).group(1)): [r for r in jsonl(f) if r["step"] == step and "kind" in r]
                 for f in glob.glob(os.path.join(run_dir, "timeline", "rank-*.jsonl"))}
    group_of = {r: i for i, g in enumerate(topo["groups"]["pp"]) for r in g}
    shown = rows(page, "#pipeline-ranks tr[data-rank]", ["data-rank"])
    check(len(shown) == topo["world_size"], f"pipeline table has {len(shown)} ranks, world {topo['world_size']}")
    for r in range(topo["world_size"]):
        compute = sum(iv["t1_us"] - iv["t0_us"] for iv in timelines[r] if iv["kind"] in ("forward", "backward"))
        span = max(iv["t1_us"] for q in topo["groups"]["pp"][group_of[r]] for iv in timelines[q])
        cell = page.eval(f"""(() => {{ const t = document.querySelector('#pipeline-ranks tr[data-rank="{r}"]');
            return [t.querySelector('[data-compute-us]').getAttribute('data-compute-us'),
                    t.querySelector('[data-span-us]').getAttribute('data-span-us')]; }})()""")
        check(int(cell[0]) == compute and int(cell[1]) == span,
              f"rank {r} step {step}: page compute/span {cell}, timeline {compute}/{span}")
    ds = chart_datasets(page, "#view-pipeline canvas")
    fwd = sum(len(d["data"]) for d in ds if d["label"] == "forward")
    want = sum(1 for r in timelines.values() for iv in r if iv["kind"] == "forward")
    check(fwd == want, f"Gantt draws {fwd} forward intervals at step {step}, the timeline holds {want}")


def time_splits(run_dir):
    """world rank → [(step, step_us, [µs per kind in KINDS order])] from the timeline's split lines."""
    out = {}
    for f in glob.glob(os.path.join(run_dir, "timeline", "rank-*.jsonl")):
        rank = int(re.search(r"rank-(\d+)", f).group(1))
        out[rank] = [(r["step"], r["step_us"], [r["split_us"][k] for k in TIME_KINDS]) for r in jsonl(f) if "split_us" in r]
    return out


def check_time(page, run_dir):
    """The time view shows each rank's split as the timeline holds it: the mean of the steps >= 1, and one step."""
    kinds = page.eval("[...document.querySelectorAll('#time-ranks tr[data-rank]')][0] ? "
                      "[...document.querySelectorAll('#time-ranks tr[data-rank]')][0].querySelectorAll('[data-kind]').length : 0")
    check(kinds == len(TIME_KINDS), f"time table shows {kinds} kinds, expected {TIME_KINDS}")
    splits = time_splits(run_dir)
    for r, lines in sorted(splits.items()):
        check(lines, f"rank {r}: no split line in its timeline")
        used = [x for x in lines if x[0] >= 1] or lines
        mean = [sum(x[2][k] for x in used) / len(used) for k in range(len(TIME_KINDS))]
        cells = rows(page, f'#time-ranks tr[data-rank="{r}"] [data-kind]', ["data-kind", "data-us"])
        got = {c["data-kind"]: float(c["data-us"]) for c in cells}
        for k, name in enumerate(TIME_KINDS):
            check(name in got and close(got[name], mean[k], 1e-9), f"rank {r} {name}: page {got.get(name)}, timeline mean {mean[k]}")
        check(mean[0] > 0, f"rank {r}: no GEMM time in its timeline")
    step = max(x[0] for lines in splits.values() for x in lines)
    page.eval(f"""(() => {{ const s = document.querySelector('#time-step'); s.value = '{step}';
        s.dispatchEvent(new Event('change')); }})()""")
    for r, lines in sorted(splits.items()):
        want = next(x for x in lines if x[0] == step)
        cells = rows(page, f'#time-ranks tr[data-rank="{r}"] [data-kind]', ["data-kind", "data-us"])
        got = [int(float(c["data-us"])) for c in cells]
        check(got == want[2], f"rank {r} step {step}: page {got}, timeline {want[2]}")
    ds = chart_datasets(page, "#view-time canvas") or []
    check([d["label"] for d in ds] == TIME_KINDS, f"time chart datasets {[d['label'] for d in ds]}")


def check_memory(page, run_dir):
    ledger = load(os.path.join(run_dir, "ledger.json"))
    cells = rows(page, "#memory-ranks td[data-category]", ["data-category", "data-measured", "data-predicted"])
    n = 0
    for r in ledger["ranks"]:
        for cat, c in r["categories"].items():
            got = page.eval(f"""(() => {{ const t = document.querySelector('#memory-ranks tr[data-rank="{r['rank']}"] td[data-category="{cat}"]');
                return t ? [t.getAttribute('data-measured'), t.getAttribute('data-predicted')] : null; }})()""")
            check(got is not None and int(got[0]) == c["measured_peak"] and int(got[1]) == c["predicted_peak"],
                  f"rank {r['rank']} {cat}: page {got}, ledger.json {c['measured_peak']}/{c['predicted_peak']}")
            n += 1
    check(n > 0 and len(cells) >= n, f"memory table: {len(cells)} cells for {n} ledger entries")


def check_traffic(page, run_dir, world):
    traced, predicted = traffic_by_group_phase(run_dir), predicted_by_group_phase(run_dir)
    shown = rows(page, "#traffic-groups tr[data-group]",
                 ["data-group", "data-phase", "data-bytes", "data-predicted-bytes"])
    got = {(r["data-group"], r["data-phase"]): (int(r["data-bytes"]),
                                               int(r["data-predicted-bytes"]) if r["data-predicted-bytes"] else None)
           for r in shown}
    want = {k: (traced.get(k, 0), predicted.get(k)) for k in set(traced) | set(predicted)}
    check(got == want, f"{run_dir}: traffic per group and phase in the page {got} != the trace and prediction {want}")
    p2p, coll = peer_matrix(run_dir, world)
    cells = rows(page, "#traffic-matrix td[data-from]", ["data-from", "data-to", "data-p2p", "data-collective"])
    check(len(cells) == world * world, f"matrix has {len(cells)} cells, world {world}")
    for c in cells:
        i, j = int(c["data-from"]), int(c["data-to"])
        check(int(c["data-p2p"]) == p2p[i][j] and int(c["data-collective"]) == coll[i][j],
              f"matrix {i}->{j}: page p2p {c['data-p2p']} coll {c['data-collective']}, trace {p2p[i][j]} {coll[i][j]}")
    return got


def check_curves(page, runs):
    """runs: name -> run directory. The loss chart's points are metrics.jsonl's, run by run."""
    ds = chart_datasets(page, "#view-curves canvas")
    # A series bit-identical to an earlier one is labelled "NAME (= OTHER bit for bit: overlapping)".
    by_label = {d["label"].split(" (= ")[0]: d["data"] for d in ds}
    losses = {}
    for name, d in runs.items():
        metrics = jsonl(os.path.join(d, "metrics.jsonl"))
        loss = [{"x": m["step"], "y": m["loss"]} for m in metrics if m["step"] >= 0 and "loss" in m]
        check(by_label.get(name) == loss, f"loss curve of {name}: page {by_label.get(name)} != metrics.jsonl {loss}")
        losses[name] = loss
        evals = [{"x": m["step"], "y": m["eval_loss"]} for m in metrics if "eval_loss" in m]
        if evals:
            check(by_label.get(name + " eval") == evals, f"eval points of {name}: {by_label.get(name + ' eval')} != {evals}")
    # Bit-identical loss series are marked as overlapping, and only those (issue 33).
    labels = [d["label"] for d in ds if d["label"].split(" (= ")[0] in runs]
    for name, loss in losses.items():
        twin = next((o for o in losses if o != name and losses[o] == loss and list(runs).index(o) < list(runs).index(name)),
                    None)
        marked = any(l.startswith(name + " (= ") for l in labels)
        check(marked == (twin is not None), f"loss curve of {name}: overlap marked {marked}, bit-identical twin {twin}")
    note = page.eval("(() => { const p = document.querySelector('#view-curves [data-overlap]'); "
                     "return p ? p.getAttribute('data-overlap') : ''; })()")
    check(bool(note) == any(l.startswith(n + " (= ") for l in labels for n in losses),
          f"the overlap note '{note}' does not match the marked series")


def check_checkpoints(page, bundle, names, k):
    shown = {(r["data-run"], int(r["data-step"])): r["data-verified"] == "true"
             for r in rows(page, ".sp-ckpt tr[data-run]", ["data-run", "data-step", "data-verified"])}
    want = {}
    for n in names:
        for d in glob.glob(os.path.join(bundle, n, "checkpoints", "step-*")):
            if re.fullmatch(r"step-\d{6,}", os.path.basename(d)):
                want[(n, int(os.path.basename(d)[5:]))] = True
    check(shown == want, f"checkpoints in the page {shown} != on disk {want}")
    if "recovery" in names:
        traced = page.eval("document.querySelector('[data-resume-traced]').getAttribute('data-resume-traced')")
        check(int(traced) == k, f"resume point: the recovery trace starts at {traced}, the checkpoint step is {k}")


def edit_report_data(path, edit):
    html = open(path).read()
    m = re.search(r'(<script type="application/json" id="sp-data">)(.*?)(</script>)', html, re.S)
    data = json.loads(m.group(2))
    edit(data)
    text = json.dumps(data, separators=(",", ":")).replace("<", "\\u003c")
    open(path, "w").write(html[:m.start(2)] + text + html[m.end(2):])


def check_edited_report_fails(args, bundle, edit, needle, what):
    """`edit` changes the data of BUNDLE/report.html; verify must then fail, naming report.html and `needle`."""
    edit_report_data(os.path.join(bundle, "report.html"), edit)
    v = run([args.bin, "verify", bundle])
    check(v.returncode == 1 and "report.html: does not show this bundle" in v.stdout and needle in v.stdout,
          f"verify of {what}: exit {v.returncode}, expected 1 naming report.html and {needle!r}\n{v.stdout[-1500:]}")


# ---- cases ----

def case_proof_pass(args):
    out = os.path.join(args.work, "proof_pass")
    p, out = prove(args, out, "pp-microbatch-swap@3", ["parallel.pp=2"])
    check(p.returncode == 0, f"prove exited {p.returncode}, expected 0 (PASS)")
    check(f"report: {out}/report.html" in p.stdout, "prove did not print the report's path")
    prove_json = load(os.path.join(out, "prove.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        check_views(page, PROOF_VIEWS, os.path.join(args.work, "screenshots", "proof_pass"))
        check_gate(page, out)
        check_divergence(page, out, prove_json)
        check_pipeline(page, os.path.join(out, "parallel"))
        check_time(page, os.path.join(out, "parallel"))
        check_memory(page, os.path.join(out, "parallel"))
        check_traffic(page, os.path.join(out, "parallel"), prove_json["world_size"])
        check_curves(page, {n: os.path.join(out, n) for n in ("reference", "parallel", "fault", "recovery")})
        check_checkpoints(page, out, ["parallel", "fault", "recovery"], prove_json["checkpoint_step"])

        # verify: PASS with the report; a report whose data were edited fails naming it; `report` restores it.
        v = run([args.bin, "verify", out])
        check(v.returncode == 0 and "verdict: PASS" in v.stdout, f"verify of the untouched bundle: exit {v.returncode}\n{v.stdout[-1500:]}")
        page_path = os.path.join(out, "report.html")
        original = open(page_path).read()

        def flip(d):
            gate = next(x for x in d["views"] if x["id"] == "gate")
            gate["data"]["criteria"][4]["passed"] = False
        check_edited_report_fails(args, out, flip, "criteria/4/passed", "a report with a flipped criterion")
        r = run([args.bin, "report", out])
        check(r.returncode == 0 and open(page_path).read() == original, "report DIR did not write the same page again")
        v = run([args.bin, "verify", out])
        check(v.returncode == 0, f"verify after report DIR: exit {v.returncode}\n{v.stdout[-800:]}")

        # The report is a function of the bundle's bytes, not of its place: a moved copy still verifies.
        moved = os.path.join(args.work, "proof_moved", "elsewhere")
        shutil.rmtree(os.path.dirname(moved), ignore_errors=True)
        shutil.copytree(out, moved)
        v = run([args.bin, "verify", moved])
        check(v.returncode == 0, f"verify of a moved copy: exit {v.returncode}\n{v.stdout[-800:]}")
        shutil.rmtree(os.path.dirname(moved), ignore_errors=True)

        # A bundle with a missing file: report exits 1 naming it; the page says so where it is needed.
        miss = os.path.join(args.work, "proof_missing")
        shutil.rmtree(miss, ignore_errors=True)
        shutil.copytree(out, miss)
        os.remove(os.path.join(miss, "parallel", "ledger.json"))
        r = run([args.bin, "report", miss])
        check(r.returncode == 1 and "parallel/ledger.json: missing" in r.stderr,
              f"report of a bundle without parallel/ledger.json: exit {r.returncode}\n{r.stderr}")
        html = open(os.path.join(miss, "report.html")).read()
        check('id="sp-problems"' in html and "parallel/ledger.json: missing" in html.split('id="sp-data"')[0],
              "the page's own markup does not list the missing file")
        page = open_page(b, os.path.join(miss, "report.html"))
        text = page.eval("document.querySelector('#view-memory').innerText")
        check("parallel/ledger.json: missing" in text, f"the memory view does not say what is missing: {text[:300]!r}")
        others = page.eval("document.querySelectorAll('#view-gate tr[data-criterion]').length")
        check(others > 0, "the other views are not drawn when one file is missing")
        page.screenshot_element("body", os.path.join(args.work, "screenshots", "proof_pass", "missing_ledger.png"))
    shutil.rmtree(miss, ignore_errors=True)


def case_proof_fail(args):
    out = os.path.join(args.work, "proof_fail")
    p, out = prove(args, out, "skip-grad-allreduce@3", ["parallel.dp=2"], ["--no-recovery"])
    check(p.returncode == 1, f"prove --no-recovery exited {p.returncode}, expected 1 (FAIL)")
    check(f"report: {out}/report.html" in p.stdout, "prove did not print the report's path")
    prove_json = load(os.path.join(out, "prove.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        check_views(page, PROOF_VIEWS, os.path.join(args.work, "screenshots", "proof_fail"))
        gate = check_gate(page, out)
        check(gate["verdict"] == "FAIL", "the bundle's gate.json is not FAIL")
        failed = {r["data-criterion"] for r in rows(page, "#gate-criteria tr.fail", ["data-criterion"])}
        for want in ("resume is exact", "recovery reproduces the reference"):
            check(want in failed, f"criterion {want!r} is not shown failed: {sorted(failed)}")
        notes = page.eval("document.querySelector('#sp-header').innerText")
        check("recovery: the stage did not run" in notes, f"the page does not say that recovery did not run: {notes!r}")
        check_divergence(page, out, prove_json)
        check_checkpoints(page, out, ["parallel", "fault"], prove_json["checkpoint_step"])
        check_curves(page, {n: os.path.join(out, n) for n in ("reference", "parallel", "fault")})
        # The fault run's traffic: fewer grad_sync bytes than predicted, and the page says so.
        page.eval("(() => { const s = document.querySelector('#traffic-run'); s.value = '1'; "
                  "s.dispatchEvent(new Event('change')); })()")
        got = check_traffic(page, os.path.join(out, "fault"), prove_json["world_size"])
        match = page.eval("document.querySelector('[data-matches-prediction]').getAttribute('data-matches-prediction')")
        check(match == "false", "the fault run's traffic is shown as matching its prediction")
        short = [k for k, (t, pr) in got.items() if k[1] == "grad_sync" and pr is not None and t < pr]
        check(short, f"no dp group shows fewer grad_sync bytes than predicted: {got}")
        page.screenshot_element("#view-traffic", os.path.join(args.work, "screenshots", "proof_fail", "traffic_fault.png"))
        b_errors = page.errors
        page.collect()
        check(page.errors == b_errors, f"console errors after switching the run: {page.errors}")

    # A report edited to show PASS fails verification, naming the file.
    def forge(d):
        d["summary"]["verdict"] = "PASS"
        gate = next(x for x in d["views"] if x["id"] == "gate")
        gate["data"]["verdict"] = "PASS"
        for c in gate["data"]["criteria"]:
            c["passed"] = True
    check_edited_report_fails(args, out, forge, "/summary/verdict", "a report edited to show PASS")


def case_proof_tp(args):
    out = os.path.join(args.work, "proof_tp")
    p, out = prove(args, out, "drop-tp-allreduce@3", ["parallel.tp=2"])
    check(p.returncode == 0, f"prove exited {p.returncode}, expected 0 (PASS)")
    prove_json = load(os.path.join(out, "prove.json"))
    check(prove_json.get("fault_anchors"), "a tp 2 proof replays anchored steps (prove.json fault_anchors)")
    drift = load(os.path.join(out, "drift.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        check_views(page, PROOF_VIEWS, os.path.join(args.work, "screenshots", "proof_tp"))
        gate = check_gate(page, out)
        check(any(c["name"].startswith("trajectory drift") and not c["required"] for c in gate["criteria"]),
              "gate.json has no informational trajectory-drift row")
        promised = page.eval("document.querySelector('[data-promised]').getAttribute('data-promised')")
        check(promised == "within-tolerance", f"the page says the contract promises {promised}")
        # The fault, read as the first divergence reads it: its anchored replay against the reference.
        cfg = load(os.path.join(out, "contract.json"))["config"]["train"]
        grad = 2.0 ** -16 * (cfg["global_batch"] * cfg["seq_len"]) ** 0.5
        tol = {"loss": 2.0 ** -16, "param": 2.0 ** -16, "grad": grad}
        first = first_out_of_tolerance(os.path.join(out, "fault-anchored", "checksums.jsonl"),
                                       os.path.join(out, "reference", "checksums.jsonl"), tol)
        title = page.eval("Chart.getChart(document.querySelector('#divergence-chart')).options.plugins.title.text")
        check(title.startswith("fault-anchored vs reference"), f"the fault series is {title!r}, not the anchored replay")
        ds = check_first_marked(page, first)
        line = [d for d in ds if d["label"].startswith("tolerance")]
        want_t = tol[first[1]] if first else None
        check(len(line) == 1 and close(line[0]["data"][0]["y"], want_t), f"tolerance line {line}, expected {want_t}")
        # The anchored parallel replay: in class at every step.
        page.eval("(() => { const s = document.querySelector('#divergence-series'); s.value = '1'; "
                  "s.dispatchEvent(new Event('change')); })()")
        title = page.eval("Chart.getChart(document.querySelector('#divergence-chart')).options.plugins.title.text")
        check(title.startswith("anchored vs reference: within-tolerance"), f"the parallel series is {title!r}")
        out_rows = rows(page, "#divergence-rows tr.fail", ["data-row"])
        check(out_rows == [], f"rows of the anchored replay shown out of class: {out_rows}")
        page.screenshot_element("#view-divergence", os.path.join(args.work, "screenshots", "proof_tp", "anchored.png"))
        # The free-running drift, as drift.json holds it.
        ds = chart_datasets(page, "#divergence-drift") or []
        pts = next((d["data"] for d in ds if d["label"].startswith("drift")), None)
        want = [{"x": s["step"], "y": s["max_rel_diff"]} for s in drift["steps"] if s["max_rel_diff"]]
        check(pts is not None and len(pts) == len(want) and all(p["x"] == w["x"] and close(p["y"], w["y"])
                                                               for p, w in zip(pts, want)),
              f"drift curve {pts} != drift.json {want}")
        for key, attr in (("eval_difference", "data-eval-difference"), ("eval_tolerance", "data-eval-tolerance")):
            shown = float(page.eval(f"document.querySelector('[{attr}]').getAttribute('{attr}')"))
            check(close(shown, drift[key]), f"{key} {shown}, drift.json {drift[key]}")
        check(page.errors == [], f"console errors after switching the series: {page.errors}")

    v = run([args.bin, "verify", out])
    check(v.returncode == 0 and "verdict: PASS" in v.stdout, f"verify: exit {v.returncode}\n{v.stdout[-1500:]}")

    def shrink(d):
        div = next(x for x in d["views"] if x["id"] == "divergence")
        div["data"]["drift"]["steps"][-1]["max_rel_diff"] /= 10
    check_edited_report_fails(args, out, shrink, "drift/steps/", "a report with an edited drift")


def case_compare(args):
    if args.bundle:  # compare.table's directory: the same command (tests/compare/compare_test.py)
        out = args.bundle
    else:
        out = os.path.join(args.work, "compare")
        shutil.rmtree(out, ignore_errors=True)
        p = run([args.bin, "compare", "--strategies", "dp2,pp2-1f1b,tp2", "--out", out, "--preset", "tiny",
                 "--set", "train.steps=3", "--set", "train.eval_batches=2", "--set", "train.eval_every=0"])
        print(p.stdout[-2000:])
        print(p.stderr[-2000:], file=sys.stderr)
        check(p.returncode == 0, f"compare exited {p.returncode}")
        check(f"report: {out}/report.html" in p.stdout, "compare did not print the report's path")
    check("report.html" in open(os.path.join(out, "compare.md")).read(), "compare.md does not link report.html")
    table = load(os.path.join(out, "compare.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        check_views(page, {"compare", "curves"}, os.path.join(args.work, "screenshots", "compare"))
        shown = rows(page, "#compare-rows tr[data-label]", ["data-label"])
        check([r["data-label"] for r in shown] == [r["label"] for r in table["rows"]],
              f"strategies in the page {shown} != compare.json")
        for r in table["rows"]:
            got = page.eval(f"""(() => {{ const t = document.querySelector('#compare-rows tr[data-label="{r['label']}"]');
                return [t.querySelector('[data-class]').getAttribute('data-class'),
                        Number(t.querySelector('[data-step-s]').getAttribute('data-step-s'))]; }})()""")
            check(got[0] == r["equivalence"]["class"] and close(got[1], r["time"]["step_s_median"]),
                  f"{r['label']}: page {got}, compare.json {r['equivalence']['class']} {r['time']['step_s_median']}")
        canvases = page.eval("document.querySelectorAll('#view-compare canvas').length")
        check(canvases >= 4, f"the compare view draws {canvases} charts, expected step time, bytes, memory, bubble")
        ds = page.eval("""(() => { for (const c of document.querySelectorAll('#view-compare canvas')) {
              const ch = Chart.getChart(c); if (ch && /bytes per training step/.test(ch.options.plugins.title.text))
              return ch.data.datasets.map(d => ({label: d.label, data: d.data})); } return null; })()""")
        by_label = {d["label"]: d["data"] for d in ds or []}
        for axis in ("dp", "tp", "pp"):
            want = [r["traffic"]["bytes_per_step_by_axis"].get(axis, {"traced": 0})["traced"] for r in table["rows"]]
            check(by_label.get(axis + " traced") == want, f"bytes chart, axis {axis}: {by_label.get(axis + ' traced')} != {want}")
        check_curves(page, {r["label"]: os.path.join(out, r["label"]) for r in table["rows"]})


def case_plan(args):
    """`plan --out` for one configuration (pp 2 across nodes, so every view is drawn) and for a search: each page
    shows plan.json's own numbers; `report DIR` writes the same page again; a plan.json of another format is a
    problem the page and the exit code name."""
    work = os.path.join(args.work, "plan")
    shutil.rmtree(work, ignore_errors=True)
    one, found = os.path.join(work, "one"), os.path.join(work, "search")
    p = run([args.bin, "plan", "--cluster", "dgx-a100", "--nodes", "4", "--model", "llama-7b", "--global-batch", "256",
             "--dp", "4", "--tp", "4", "--pp", "2", "--zero", "1", "--out", one])
    check(p.returncode == 0 and f"report: {one}/report.html" in p.stdout, f"plan --out: exit {p.returncode}\n{p.stderr[-1500:]}")
    plan = load(os.path.join(one, "plan.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(one, "report.html"))
        check_views(page, {"plan-time", "plan-memory", "plan-traffic", "plan-pipeline"},
                    os.path.join(args.work, "screenshots", "plan"))
        attr = lambda sel, a: page.eval(f"document.querySelector({json.dumps(sel)}).getAttribute({json.dumps(a)})")
        check(close(float(attr("[data-step-s]", "data-step-s")), plan["step"]["seconds"]) and
              close(float(attr("[data-mfu]", "data-mfu")), plan["step"]["mfu"]),
              f"step time / MFU in the page differ from plan.json {plan['step']}")
        check(attr("#view-plan-time [data-strategy]", "data-strategy") == plan["inputs"]["strategy"]["name"],
              f"the strategy shown is not plan.json's {plan['inputs']['strategy']}")
        parts = {r["data-part"]: float(r["data-seconds"]) for r in rows(page, "#plan-time-parts tr[data-part]",
                                                                         ["data-part", "data-seconds"])}
        check(close(sum(parts.values()), plan["step"]["seconds"], 1e-9),
              f"the step's parts {parts} do not add up to plan.json's step {plan['step']['seconds']}")
        shown = {(int(r["data-rank"]), r["data-category"]): int(r["data-bytes"])
                 for r in rows(page, "#plan-memory-ranks td[data-category]", ["data-rank", "data-category", "data-bytes"])
                 if r["data-rank"] is not None}
        cells = page.eval("""[...document.querySelectorAll('#plan-memory-ranks tr[data-rank]')].flatMap(tr =>
            [...tr.querySelectorAll('td[data-category]')].map(td => [Number(tr.dataset.rank), td.dataset.category,
            Number(td.dataset.bytes)]))""")
        want = [[r["rank"], c, v] for r in plan["memory"]["ranks"] for c, v in r["by_category"].items() if v > 0] + \
               [[r["rank"], "peak", r["peak_bytes"]] for r in plan["memory"]["ranks"]]
        check(sorted(map(tuple, cells)) == sorted(map(tuple, want)), f"memory cells {cells} != plan.json {want}")
        traffic = page.eval("""[...document.querySelectorAll('#plan-traffic-cells tr[data-cell]')].map(tr =>
            [tr.dataset.cell, Number(tr.querySelector('[data-bytes]').dataset.bytes)])""")
        check(traffic == [[f"{t['axis']}/{t['phase']}/{t['op']}", t["bytes"]] for t in plan["traffic"]],
              f"traffic cells {traffic} != plan.json")
        links = rows(page, "#plan-links tr[data-axis]", ["data-axis", "data-link"])
        check({r["data-axis"]: r["data-link"] for r in links} == {a: l["link"] for a, l in plan["placement"]["links"].items()},
              f"links in the page {links}")
        ds = chart_datasets(page, "#view-plan-pipeline canvas") or []
        drawn = sum(len(d["data"]) for d in ds)
        check(drawn == len(plan["pipeline"]["actions"]) and drawn == 2 * 2 * plan["pipeline"]["micro_batches"],
              f"Gantt intervals {drawn}, plan.json has {len(plan['pipeline']['actions'])} (2 stages × 2 passes × m)")
        last = max(x["x"][1] for d in ds for x in d["data"]) if drawn else None
        check(last is not None and close(last, plan["pipeline"]["simulated_seconds"], 1e-9),
              f"the Gantt ends at {last}, the simulated pipeline at {plan['pipeline']['simulated_seconds']}")
        shown = page.eval("[...document.querySelectorAll('#plan-warnings li')].map(e => e.textContent)")
        check(shown == plan["placement"]["warnings"] == [], f"placement warnings {shown} for tp inside the nodes")
    # The topology check: the same strategy with the tp groups across nodes is flagged, in the page too.
    across = os.path.join(work, "across")
    p = run([args.bin, "plan", "--cluster", "dgx-a100", "--nodes", "4", "--model", "llama-7b", "--global-batch", "256",
             "--dp", "4", "--tp", "4", "--pp", "2", "--zero", "1", "--axis-order", "dp-tp-pp", "--out", across])
    warned = load(os.path.join(across, "plan.json"))["placement"]["warnings"]
    check(p.returncode == 0 and len(warned) == 1 and "cross nodes" in warned[0] and "WARNING" in p.stdout,
          f"tp across nodes: exit {p.returncode}, warnings {warned}")
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(across, "report.html"))
        shown = page.eval("[...document.querySelectorAll('#plan-warnings li')].map(e => e.textContent)")
        check(shown == warned, f"the page shows warnings {shown}, plan.json {warned}")
    before = open(os.path.join(one, "report.html"), "rb").read()
    r = run([args.bin, "report", one])
    check(r.returncode == 0 and open(os.path.join(one, "report.html"), "rb").read() == before,
          f"`report` of the plan directory did not write the same page (exit {r.returncode})")

    p = run([args.bin, "plan", "--cluster", "dgx-a100", "--nodes", "2", "--model", "llama-7b", "--global-batch", "64",
             "--search", "--out", found])
    check(p.returncode == 0, f"plan --search --out: exit {p.returncode}\n{p.stderr[-1500:]}")
    result = load(os.path.join(found, "plan.json"))
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(found, "report.html"))
        check_views(page, {"plan-search"}, os.path.join(args.work, "screenshots", "plan_search"))
        names = [r["data-strategy"] for r in rows(page, "#plan-ranked tr[data-strategy]", ["data-strategy"])]
        want = [r["strategy"]["name"] for r in result["ranked"][:100]]
        check(names == want, f"ranked strategies in the page ({len(names)}) != plan.json's best ({len(want)})")
        counted = sum(int(r["data-count"]) for r in rows(page, "#plan-excluded tr[data-kind]", ["data-count"]))
        # Each rule counts strategies, each once however many of its reasons share the rule (the rule's text up
        # to its first digit), so the rules of a kind never add up to more than the kind's strategies.
        per_rule = sum(len({(w["kind"], re.split(r"[0-9]", w["rule"], maxsplit=1)[0]) for w in x["reasons"]})
                       for x in result["excluded"])
        check(counted == per_rule, f"the excluded rules count {counted} strategies, plan.json gives {per_rule}")
        by_kind = {}
        for r in rows(page, "#plan-excluded tr[data-kind]", ["data-kind", "data-count"]):
            by_kind[r["data-kind"]] = by_kind.get(r["data-kind"], 0) + int(r["data-count"])
        kinds = {}
        for x in result["excluded"]:
            for k in {w["kind"] for w in x["reasons"]}:
                kinds[k] = kinds.get(k, 0) + 1
        check(all(by_kind[k] >= kinds[k] for k in kinds) and sum(kinds.values()) <= counted,
              f"rules per kind {by_kind} against strategies per kind {kinds}")
    # A plan.json of another format: a problem naming it, exit 1, and a page that says so.
    bad = os.path.join(work, "bad")
    os.makedirs(bad)
    with open(os.path.join(bad, "plan.json"), "w") as f:
        json.dump({"format_version": 7}, f)
    r = run([args.bin, "report", bad])
    check(r.returncode == 1 and "plan.json" in r.stderr + r.stdout, f"report of a bad plan.json: exit {r.returncode}\n{r.stderr}")
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(bad, "report.html"))
        text = page.eval("document.body.innerText")
        check("plan.json" in text and "format_version 1" in text, f"the page does not name the problem: {text[:400]!r}")


def case_bad_input(args):
    work = os.path.join(args.work, "bad_input")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "empty"))
    r = run([args.bin, "report", os.path.join(work, "nowhere")])
    check(r.returncode == 2 and "is not a directory" in r.stderr, f"report of a missing directory: exit {r.returncode}\n{r.stderr}")
    r = run([args.bin, "report", os.path.join(work, "empty")])
    check(r.returncode == 2 and all(f in r.stderr for f in ("prove.json", "compare.json", "contract.json")),
          f"report of a directory that is not a bundle: exit {r.returncode}, expected 2 naming what it looked for\n{r.stderr}")
    check(not os.path.exists(os.path.join(work, "empty", "report.html")), "a page was written into a non-bundle directory")
    page_path = os.path.join(work, "page.html")
    r = run([args.bin, "report", os.path.join(work, "empty"), "--out", page_path])
    check(r.returncode == 2 and os.path.exists(page_path), f"report --out of a non-bundle: exit {r.returncode}, page written: "
                                                            f"{os.path.exists(page_path)}")
    with Browser(args.work) as b:
        page = open_page(b, page_path)
        text = page.eval("document.body.innerText")
        check("is not a shardproof bundle" in text and "prove.json" in text, f"the page does not say why: {text[:400]!r}")
        os.makedirs(os.path.join(args.work, "screenshots", "bad_input"), exist_ok=True)
        page.screenshot_element("body", os.path.join(args.work, "screenshots", "bad_input", "not_a_bundle.png"))


def case_lab(args):
    """A lab's bundle (labs.lab_run's LSL-D, or `lab run LSL-D` here): the page opens with the lab (key, section,
    mechanism, every observation of prove.json's lab linked to a view the page has), summary.md carries the same
    links, the bit-identical parallel and reference curves are marked as overlapping, and verify passes."""
    out = args.bundle or os.path.join(args.work, "lab")
    if not args.bundle:
        T.fresh(out)
        p = run([args.bin, "lab", "run", "LSL-D", "--out", out, "--quiet"])
        check(p.returncode == 0, f"lab run LSL-D exited {p.returncode}\n{p.stdout[-1500:]}")
    lab = load(os.path.join(out, "prove.json")).get("lab")
    check(lab is not None and lab["key"] == "LSL-D", f"prove.json carries no lab LSL-D: {lab}")
    if lab is None:
        return
    summary = open(os.path.join(out, "summary.md")).read()
    check(f"Lab **{lab['key']}**, §{lab['section']}" in summary, "summary.md does not open with the lab")
    for i, o in enumerate(lab["observations"]):
        check(f"{i + 1}. {o['text']} ([view](report.html#view-{o['view']}))" in summary,
              f"summary.md lacks observation {i + 1} linked to its view")
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        views = check_views(page, PROOF_VIEWS, os.path.join(args.work, "screenshots", "lab"))
        head = page.eval("(() => { const s = document.querySelector('#sp-header #sp-lab'); return s ? "
                         "{key: s.getAttribute('data-lab'), title: s.querySelector('h2').textContent, "
                         "mechanism: s.querySelector('.sp-lab-mechanism').textContent, "
                         "items: [...s.querySelectorAll('li')].map(li => ({view: li.getAttribute('data-observation-view'), "
                         "text: li.textContent, href: (li.querySelector('a') || {}).getAttribute ? "
                         "li.querySelector('a').getAttribute('href') : null}))} : null; })()")
        check(head is not None, "the page has no lab header")
        if head:
            check(head["key"] == "LSL-D" and head["title"] == f"Lab LSL-D §{lab['section']} {lab['title']}",
                  f"lab header {head['key']} / {head['title']}")
            check(head["mechanism"] == lab["mechanism"], "the lab header's mechanism is not prove.json's")
            check(len(head["items"]) == len(lab["observations"]), f"{len(head['items'])} observations drawn, "
                  f"{len(lab['observations'])} in prove.json")
            for item, o in zip(head["items"], lab["observations"]):
                check(item["text"].startswith(o["text"]), f"observation drawn as {item['text'][:60]!r}")
                check(item["view"] in views and item["href"] == "#view-" + item["view"],
                      f"observation '{o['text'][:40]}' links {item['href']}, not a view of the page ({views})")
        # LSL-D has no pipeline (pp 1): no schedule among the header's facts or in the title (issue 45: "1f1b").
        facts = page.eval("[...document.querySelectorAll('#sp-header [data-summary]')].map(s => s.textContent)")
        title = page.eval("document.title + ' ' + (document.querySelector('h1') || {textContent: ''}).textContent")
        check(not any(f.startswith("schedule") for f in facts) and "1f1b" not in title,
              f"a run without a pipeline shows a schedule: facts {facts}, title {title!r}")
        # dp is a bitwise class: parallel's loss is the reference's, bit for bit, and is marked so.
        check_curves(page, {n: os.path.join(out, n) for n in ("reference", "parallel", "fault", "recovery")})
        note = page.eval("(() => { const p = document.querySelector('#view-curves [data-overlap]'); "
                         "return p ? p.getAttribute('data-overlap') : ''; })()")
        check("parallel = reference" in note, f"parallel and reference are bit-identical but not marked: '{note}'")
    v = run([args.bin, "verify", out])
    check(v.returncode == 0, f"verify of the lab's bundle: exit {v.returncode}\n{v.stdout[-1500:]}")


def case_fault_ended(args):
    """A passing proof whose fault stage ended with exit 1 (desync-extra-collective stops the job: the faults
    suite's bundle): the stage's end is stated as information under the green PASS, never as a warning (issue 45:
    a green PASS sat under a yellow "the stage ended with exit 1")."""
    _, out = prove(args, os.path.join(args.work, "fault_ended"), "desync-extra-collective@3:2",
                   ["parallel.dp=2", "parallel.pp=2", "parallel.zero=1"])
    st = {s["name"]: s for s in load(os.path.join(out, "prove.json"))["stages"]}
    check(st["fault"]["exit_code"] == 1, f"the fault stage exited {st['fault']['exit_code']}, the case needs 1")
    with Browser(args.work) as b:
        page = open_page(b, os.path.join(out, "report.html"))
        verdict = page.eval("document.querySelector('[data-summary-verdict]').getAttribute('data-summary-verdict')")
        warn = page.eval("[...document.querySelectorAll('#sp-header .sp-notes li')].map(li => li.textContent)")
        info = page.eval("[...document.querySelectorAll('#sp-header .sp-info li')].map(li => li.textContent)")
        check(verdict == "PASS", f"the page's verdict is {verdict}")
        check(not any("ended with exit" in w for w in warn), f"the fault stage's end is a warning: {warn}")
        check(any(i.startswith("fault: the stage ended with exit 1") for i in info),
              f"the fault stage's end is not stated as information: {info}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--bundle", help="a proof bundle of the faults suite to use instead of proving again")
    args = ap.parse_args()
    args.work = os.path.abspath(args.work)
    os.makedirs(args.work, exist_ok=True)
    cases = {"proof_pass": case_proof_pass, "proof_fail": case_proof_fail, "proof_tp": case_proof_tp,
             "compare": case_compare, "plan": case_plan, "lab": case_lab,
             "bad_input": case_bad_input, "fault_ended": case_fault_ended}
    if args.case not in cases:
        print("unknown case", args.case)
        sys.exit(2)
    if not os.access(CHROMIUM, os.X_OK):
        print(f"FAIL: no Chromium at {CHROMIUM}: install it with scripts/install-deps.sh (Debian package chromium)")
        sys.exit(1)
    t0 = time.time()
    cases[args.case](args)
    print(f"{args.case}: {len(failures)} failure(s) in {time.time() - t0:.1f} s; screenshots in "
          f"{os.path.join(args.work, 'screenshots', args.case)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
