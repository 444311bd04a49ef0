#!/usr/bin/env python3
"""An installed shardproof runs without its source tree (README §Install, docs/install.md).

`cmake --install BUILD --prefix TMP/prefix` into a fresh temporary prefix, then from another directory:
  - `shardproof --version` names the installed data directory (PREFIX/share/shardproof), not the source tree;
  - `shardproof prove --preset demo` PASSes with the source tree out of reach: the command runs in a private
    mount namespace (unshare -m) in which an empty tmpfs is mounted over the source directory and the build
    directory, so nothing there can be read, while the real tree stays untouched for every other test running
    at the same time; the prepared-data cache goes to $XDG_CACHE_HOME (an installed root is read-only);
  - moving the whole prefix elsewhere keeps it working (`--version` follows the binary).
Without the privilege to unshare a mount namespace (not root), the source tree cannot be hidden; the test
then says so and still requires the installed data directory to be the one used (the build-tree fallback
applies only to a binary inside its build tree, cli/run_setup.h).

usage: install_test.py --build BUILD --source SRC [--work DIR]
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import sp_test as T  # noqa: E402


def can_hide(paths):
    """True when this process may mount over `paths` in a private mount namespace."""
    cmd = ["unshare", "-m", "sh", "-c", " && ".join(f"mount -t tmpfs none '{p}'" for p in paths) + " && true"]
    return shutil.which("unshare") is not None and T.run(cmd, timeout=30).returncode == 0


def hidden(paths, argv):
    """`argv` inside a mount namespace where each of `paths` is an empty tmpfs."""
    mounts = " && ".join(f"mount -t tmpfs none '{p}'" for p in paths)
    return ["unshare", "-m", "sh", "-c", f'{mounts} && exec "$@"', "sh"] + argv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    src, build = os.path.realpath(a.source), os.path.realpath(a.build)
    # Outside the source and build trees: they are hidden below.
    work = tempfile.mkdtemp(prefix="sp-install-", dir="/tmp")
    try:
        prefix = os.path.join(work, "prefix")
        T.run_ok(["cmake", "--install", build, "--prefix", prefix], timeout=120)
        binary = os.path.join(prefix, "bin", "shardproof")
        share = os.path.join(prefix, "share", "shardproof")
        for rel in ["configs/demo.toml", "configs/clusters/dgx-a100.toml", "configs/labs/catalogue.toml",
                    "data/sources.json", "data/published/megatron-ptdp-table1.toml"]:
            T.check(os.path.isfile(os.path.join(share, rel)), f"installed {rel} is missing under {share}")
        T.check(not os.path.exists(os.path.join(share, "configs/clusters/this-host.toml")),
                "this-host.toml describes the build machine; it must not be installed")
        env = {k: v for k, v in os.environ.items() if k not in ("SHARDPROOF_ROOT", "SP_SOURCE_DIR")}
        env["HOME"] = os.path.join(work, "home")
        env["XDG_CACHE_HOME"] = os.path.join(work, "cache")
        run_dir = os.path.join(work, "elsewhere")
        os.makedirs(run_dir)

        v = T.run_ok([binary, "--version"], env=env, cwd=run_dir)
        T.check(f"data: installed: {share}" in v.stdout, f"--version does not name {share}:\n{v.stdout}")

        hide = [src] if build.startswith(src + "/") else [src, build]
        out = os.path.join(work, "proof")
        argv = [binary, "prove", "--preset", "demo", "--out", out]
        if can_hide(hide):
            print(f"source tree hidden: {', '.join(hide)} are empty tmpfs mounts for the run")
            p = T.run(hidden(hide, argv), env=env, cwd=run_dir, timeout=600)
        else:
            print("source tree NOT hidden (no privilege for a private mount namespace); the installed "
                  "data directory is still required below")
            p = T.run(argv, env=env, cwd=run_dir, timeout=600)
        if p.returncode != 0 or "PASS" not in p.stdout:
            T.show(p, tail=4000)
            T.fail(f"prove --preset demo from the installed prefix exited {p.returncode}")
        T.check(os.path.isdir(os.path.join(env["XDG_CACHE_HOME"], "shardproof")),
                "the prepared-data cache was not written under $XDG_CACHE_HOME/shardproof")
        T.check(not os.path.exists(os.path.join(share, ".shardproof-cache")),
                "prove wrote a cache into the installed (read-only) data directory")

        # The prefix moves as a whole: the binary follows itself to its data.
        moved = os.path.join(work, "moved")
        os.rename(prefix, moved)
        v = T.run_ok([os.path.join(moved, "bin", "shardproof"), "--version"], env=env, cwd=run_dir)
        T.check(f"data: installed: {os.path.join(moved, 'share', 'shardproof')}" in v.stdout,
                f"a moved prefix does not find its data:\n{v.stdout}")
        # A binary copied out of its prefix, without data next to it, names where it looked.
        lone = os.path.join(work, "lone", "bin")
        os.makedirs(lone)
        shutil.copy(os.path.join(moved, "bin", "shardproof"), lone)
        p = T.run([os.path.join(lone, "shardproof"), "prove", "--preset", "demo", "--out", os.path.join(work, "x")],
                  env=env, cwd=run_dir, timeout=120)
        T.check(p.returncode == 2 and os.path.join(work, "lone", "share", "shardproof") in p.stderr,
                f"a binary without its data: exit {p.returncode}, expected 2 naming where it looked:\n{p.stderr}")
        print("PASS: installed prefix runs prove --preset demo without the source tree")
        return 0
    except T.Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
