"""What every benchmark prints about its host (docs/performance.md: every speed figure names the CPU flags it was
measured with): the CPU model and its SIMD flags, and the 1-minute load average."""
import pathlib
import re


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
