"""The namespace hosts of scripts/netns_hosts.sh from Python: a context manager that brings N hosts up with a shaped
link between them, hands back the environment that makes mpirun (and so `train --np`, `prove`, `plan calibrate`)
launch across them, and always takes them down again, whatever the body raised (tests/multihost, bench/).

Not a second implementation of the script: every namespace, address, qdisc and the agent are the script's.
`unavailable()` says why this machine cannot make them (not root, no CAP_NET_ADMIN, no iproute2): a test then
skips with that reason (ctest SKIP_RETURN_CODE 77), it does not pass.
"""
import contextlib
import os
import subprocess

SKIP = 77  # ctest's SKIP_RETURN_CODE for tests/multihost
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "netns_hosts.sh")


def unavailable():
    """None when namespace hosts can be made here, else the reason (the script's `check`)."""
    p = subprocess.run(["bash", SCRIPT, "check"], capture_output=True, text=True)
    return None if p.returncode == 0 else (p.stderr.strip() or f"netns_hosts.sh check exited {p.returncode}")


def prefix_for(tag):
    """A namespace prefix of its own for this process (two tests at once never share hosts): 8 characters."""
    return f"{tag[:2]}{os.getpid() % 100000:05d}"[:8]


def read_env(path):
    """The `export NAME=value` lines of the script's mpi.env as a dict."""
    env = {}
    with open(path) as f:
        for line in f:
            if line.startswith("export "):
                k, v = line[len("export "):].strip().split("=", 1)
                env[k] = v
    return env


@contextlib.contextmanager
def hosts(count, inter="300mbit", slots=2, tag="mh"):
    """Brings `count` namespace hosts up (each link shaped to `inter` per direction, `slots` slots each); yields
    (environment for mpirun, list of host names); takes them down on leaving, also after an exception."""
    prefix = prefix_for(tag)
    state = f"/tmp/shardproof-netns-{prefix}"
    try:
        subprocess.run(["bash", SCRIPT, "up", str(count), "--inter", inter, "--slots", str(slots), "--prefix", prefix,
                        "--dir", state], check=True)
        env = dict(os.environ)
        env.update(read_env(os.path.join(state, "mpi.env")))
        names = [line.split()[0] for line in open(os.path.join(state, "hosts")) if line.strip()]
        yield env, names
    finally:
        subprocess.run(["bash", SCRIPT, "down", "--prefix", prefix, "--dir", state])
