"""What every benchmark prints about its host (docs/performance.md: every speed figure names the CPU flags it was
measured with): the CPU model and its SIMD flags, and the 1-minute load average; and the one step time a run
directory is measured by (the median of steps >= 1: step 0 includes one-time warm-up)."""
import json
import pathlib
import re
import statistics


def cpu():
    """(model name, sorted avx*/amx*/fma/f16c flags) from /proc/cpuinfo."""
    model, flags = "unknown CPU", set()
    for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name") and model == "unknown CPU":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags"):
            flags |= set(line.split(":", 1)[1].split())
    return model, sorted(f for f in flags if re.match(r"^(avx|amx|fma|f16c)", f))


def load():
    """The 1-minute load average, as /proc/loadavg writes it."""
    return pathlib.Path("/proc/loadavg").read_text().split()[0]


def median_step(run_dir):
    """The median step_s of metrics.jsonl's steps >= 1 in run_dir."""
    rows = [json.loads(line) for line in (pathlib.Path(run_dir) / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return statistics.median(r["step_s"] for r in rows if r.get("step", -1) >= 1 and "step_s" in r)
