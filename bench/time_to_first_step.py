"""Time from `shardproof train` launch to its first progress line ("step 1/N"), then stop the run;
also the process's peak RSS and the size of comm_predicted.json. docs/performance.md (issue 20):
the cost of train.steps before step 1.
Usage: time_to_first_step.py SHARDPROOF STEPS OUT_DIR [CAP_SECONDS]"""
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import time

b, steps, out = sys.argv[1], sys.argv[2], sys.argv[3]
cap = float(sys.argv[4]) if len(sys.argv) > 4 else 120
shutil.rmtree(out, ignore_errors=True)
cmd = [b, "train", "--preset", "tiny", "--set", "model.dim=64", "--set", "model.n_heads=4", "--set", "model.n_kv_heads=2",
       "--set", "model.ffn_dim=128", "--set", "model.max_seq=32", "--set", "train.seq_len=32",
       "--set", f"train.steps={steps}", "--set", "train.eval_every=0", "--set", "train.eval_batches=2", "--out", out]
t0 = time.time()
p = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
sel = selectors.DefaultSelector()
sel.register(p.stderr, selectors.EVENT_READ)
first = None
while time.time() - t0 < cap and p.poll() is None:
    if sel.select(timeout=0.5) and "step 1/" in p.stderr.readline():
        first = time.time() - t0
        break
p.send_signal(signal.SIGKILL)
p.wait()
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
pred = os.path.join(out, "comm_predicted.json")
size = os.path.getsize(pred) if os.path.exists(pred) else None
print(f"steps={steps} first_step_s={'%.2f' % first if first else 'none within %g s' % cap} "
      f"peak_rss_MB={rss / 1024:.0f} comm_predicted_bytes={size}")
