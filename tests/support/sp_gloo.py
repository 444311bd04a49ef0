"""Runs a function on N gloo processes on this machine and returns each rank's result: the one helper the
package's pytest files (tests/python/) use to exercise torch.distributed, DTensor, FSDP2 and the frameworks on a
CPU. Forked processes (the parent's imports are inherited), 1 thread each, a fresh port per call; an exception on
any rank fails the call with that rank's traceback. Not a launcher for users (examples start their own).
"""
import datetime
import os
import socket
import traceback

import torch.multiprocessing as mp


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank, world, port, fn, args, queue):
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(world),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(world))
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world, timeout=datetime.timedelta(seconds=120))
        queue.put((rank, True, fn(rank, world, *args)))
    except BaseException:  # noqa: BLE001 - every failure goes back to the test, named by rank
        queue.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def run(world, fn, *args, timeout=300):
    """[fn(rank, world, *args) for every rank], each computed in its own gloo process (results must pickle)."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_worker, args=(r, world, port, fn, args, queue)) for r in range(world)]
    for p in procs:
        p.start()
    results = {}
    try:
        for _ in range(world):
            rank, ok, value = queue.get(timeout=timeout)
            if not ok:
                raise AssertionError(f"rank {rank} failed:\n{value}")
            results[rank] = value
    finally:
        for p in procs:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    return [results[r] for r in range(world)]
