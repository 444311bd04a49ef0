"""The rounding probe of a bf16 autocast run (docs/judge.md §1d, docs/equivalence.md §8).

Under torch.autocast(dtype=torch.bfloat16), layer 0's q_proj rounds to bf16 an fp32 sum of products of two bf16
roundings, of its fp32 input and of its fp32 weight. The judge can redo that from the same inputs: the weight is the
replayed parameter (bit for bit the run's) and the input is what this probe records. Every element of the run's
output must then be the bf16 rounding of the exact sum, up to the fp32 summation's error: one ulp off only next to a
rounding boundary, and about as often as that error predicts. A truncating cast, a 16-bit accumulation or a
different weight breaks it even where the gradients stay inside the 16-bit envelope.

At every step, on the rank whose forward computes micro-batch 0 through q_proj, a forward hook writes the first ROWS
rows of that forward's input (fp32) and output (bf16 values widened exactly to fp32) to
probe/step-S/rank-N.safetensors {"input": [R, dim], "output": [R, heads · head_dim]}. Declared in the contract
(precision.probe) for bf16 autocast without tensor parallelism. Changes nothing.
"""
import torch

from . import discovery, files, layout

MODULE = "model.layers.0.self_attn.q_proj"
ROWS = 256


def declared(autocast, grid):
    """The contract's precision.probe: the probed module where the run is probed, else None."""
    return MODULE if autocast == "bfloat16" and grid.tp == 1 else None


class Probe:
    def __init__(self, rec, model):
        self.rec, self.taken = rec, None
        for name, module in model.named_modules():
            if discovery.hf_name(name) == MODULE:
                module.register_forward_hook(self._hook)
                break

    def _hook(self, module, args, output):
        rec = self.rec
        if rec.step < 0 or rec.trace.micro_batch != 0 or self.taken == rec.step or not args:
            return
        x = args[0]
        if not (torch.is_tensor(x) and torch.is_tensor(output) and x.dtype == torch.float32
                and output.dtype == torch.bfloat16):
            return  # not the autocast cast this probe is for (the judge says the step was not probed)
        self.taken = rec.step
        rows = [("input", x.detach().reshape(-1, x.shape[-1])[:ROWS].float().cpu().numpy()),
                ("output", output.detach().reshape(-1, output.shape[-1])[:ROWS].float().cpu().numpy())]
        rec._write(layout.probe_path(rec.out, rec.step, rec.rank),
                   files.safetensors_bytes(rows, rec._file_metadata("shardproof-torch-probe")))
