"""The engine runs the CPU's fast OpenBLAS core by itself (issue 28; docs/performance.md §"The OpenBLAS core"),
end to end through the real binary and real mpirun:

  version   `shardproof --version` names the core and who chose it. On a CPU whose /proc/cpuinfo lists
            AVX-512 F/CD/BW/DQ/VL the core is an AVX-512 one (SkylakeX, Cooperlake, SapphireRapids), on an
            AVX2 + FMA CPU at least Haswell (or OpenBLAS's own non-Intel choice, e.g. Zen), never an SSE core.
            A user's OPENBLAS_CORETYPE=Prescott is respected and named; SP_BLAS_CORE_FROM alone (the re-exec
            guard) stops the selection, so no process re-executes twice.
  evidence  a 2-rank run records the core in contract.json (engine.blas) and per rank in topology.json;
            a run forced to Prescott is another contract: `verify --against` refuses the pair naming
            engine.blas, and resuming the default run's checkpoint under Prescott is refused the same way
            (under its own core it resumes).
Each case takes a few seconds on 2 cores. Usage: blas_core_test.py CASE --bin shardproof --work DIR
"""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402

SMALL = ["--preset", "tiny", "--quiet"] + T.sets(
    ["model.dim=64", "model.n_heads=4", "model.n_kv_heads=2", "model.ffn_dim=128", "model.max_seq=32",
     "train.seq_len=32", "train.steps=4", "train.eval_every=0", "train.eval_batches=2", "parallel.dp=2"])
SSE_CORES = {"prescott", "core2", "penryn", "dunnington", "nehalem", "atom"}
ARGS = None
check = T.check


def env(**kw):
    """This process's environment without any core choice, plus `kw`."""
    e = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "SP_BLAS_CORE_FROM")}
    e.update(kw)
    return e


def version_core(**kw):
    """(core, the whole 'blas core:' line) of `shardproof --version` under env(**kw)."""
    p = T.run_ok([ARGS.bin, "--version"], env=env(**kw))
    m = re.search(r"^blas core: (\S+) \((.*)\)$", p.stdout, re.M)
    check(m, f"--version names no blas core:\n{p.stdout}")
    return m.group(1), m.group(0)


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def case_version():
    flags = cpu_flags()
    core, line = version_core()
    print(line)
    if {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        check(core.lower() in ("skylakex", "cooperlake", "sapphirerapids"), f"AVX-512 CPU runs {line}")
    elif {"avx2", "fma"} <= flags:
        check(core.lower() not in SSE_CORES | {"sandybridge"}, f"AVX2 CPU runs {line}")
    core, line = version_core(OPENBLAS_CORETYPE="Prescott")
    check(core == "Prescott" and "OPENBLAS_CORETYPE=Prescott from the environment" in line,
          f"the user's OPENBLAS_CORETYPE is not respected: {line}")
    _, line = version_core(SP_BLAS_CORE_FROM="Prescott")
    check("selected by shardproof" not in line, f"the re-exec guard does not stop the selection: {line}")


def train(out, *extra, **kw):
    return T.run(T.launch(ARGS.bin, 2) + ["train", "--out", out, *SMALL, *extra], timeout=300, env=env(**kw))


def case_evidence():
    base, prescott = os.path.join(ARGS.work, "default"), os.path.join(ARGS.work, "prescott")
    p = train(T.fresh(base), "--stop-after", "2", "--set", "evidence.checkpoint_every=2")
    check(p.returncode == 0, f"default run failed:\n{p.stderr[-3000:]}")
    core, _ = version_core()
    blas = T.read_json(os.path.join(base, "contract.json"))["engine"]["blas"]
    check(re.search(rf"\b{re.escape(core)}\b", blas), f"contract engine.blas '{blas}' does not name core {core}")
    ranks = T.read_json(os.path.join(base, "topology.json"))["ranks"]
    check([r.get("blas_core") for r in ranks] == [core, core], f"topology ranks' blas_core: {ranks}")
    if core == "Prescott":
        print("this host's default core is Prescott: the two-contract half has nothing to compare")
        return
    p = train(T.fresh(prescott), OPENBLAS_CORETYPE="Prescott")
    check(p.returncode == 0, f"Prescott run failed:\n{p.stderr[-3000:]}")
    ranks = T.read_json(os.path.join(prescott, "topology.json"))["ranks"]
    check([r.get("blas_core") for r in ranks] == ["Prescott", "Prescott"], f"forced ranks' blas_core: {ranks}")
    v = T.run([ARGS.bin, "verify", prescott, "--against", base], env=env())
    text = v.stdout + v.stderr
    check(v.returncode != 0 and "engine.blas" in text and "not comparable" in text,
          f"verify --against across BLAS cores (exit {v.returncode}):\n{text[-3000:]}")
    r = train(base, "--resume", "required", OPENBLAS_CORETYPE="Prescott")
    text = r.stdout + r.stderr
    check(r.returncode != 0 and "engine.blas" in text, f"resume under another core (exit {r.returncode}):\n{text}")
    r = train(base, "--resume", "required")  # the same checkpoint under its own core resumes
    check(r.returncode == 0, f"resume under the checkpoint's own core failed:\n{(r.stdout + r.stderr)[-3000:]}")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    def keep(args):
        global ARGS
        ARGS = args
    T.drive(CASES, keep)


if __name__ == "__main__":
    main()
