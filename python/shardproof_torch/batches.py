"""Hugging Face-shaped micro-batches (input_ids, labels with -100, attention_mask, position_ids) turned into the
engine's token rows (docs/formats/token_batch.md: T + 1 ids, -1 = padding), and a loss helper with Hugging Face's
shift, so a user records the batches and the loss their loop already has (docs/judge.md §1).

A row of T tokens predicts T - 1 targets (the model shifts: position t predicts labels[t + 1]); the engine's row
is the same T ids with padding as -1, so the recording's seq_len is T - 1. What the engine's rows cannot say is
refused by name (Refused): a label that is neither the next input nor -100, a -100 label on a real token (prompt
masking: the engine ignores a target only where its input is padding), left padding or holes in the attention
mask, and packed sequences (position_ids that restart: the engine attends causally across the whole row).
"""
import torch

from .declared import Refused

IGNORE = -100  # Hugging Face's ignore_index


def engine_rows(input_ids, labels=None, attention_mask=None, position_ids=None, where="micro-batch"):
    """(B, T) tensors -> (B, T) int32 engine rows: ids where attended, -1 where padding."""
    ids = torch.as_tensor(input_ids).to(torch.int64)
    if ids.dim() != 2 or ids.shape[1] < 2:
        raise Refused(f"{where}: input_ids of shape {list(ids.shape)}: (rows, T >= 2)")
    B, T = ids.shape
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).to(torch.int64)
    if mask.shape != ids.shape or not bool(((mask == 0) | (mask == 1)).all()):
        raise Refused(f"{where}: attention_mask must be 0/1 of the input_ids' shape {list(ids.shape)}")
    # Right padding only: once a row's mask is 0 it stays 0.
    later = torch.cummin(mask, dim=1).values
    if bool((later != mask).any()):
        b = int((later != mask).any(dim=1).nonzero()[0])
        raise Refused(f"{where}: row {b}'s attention_mask has a 0 before a 1 (left padding or a hole): the "
                      f"engine's rows pad on the right only")
    if position_ids is not None:
        pos = torch.as_tensor(position_ids).to(torch.int64)
        want = torch.arange(T).expand(B, T)
        bad = (pos != want) & (mask == 1)
        if bool(bad.any()):
            b, t = (int(x) for x in bad.nonzero()[0])
            raise Refused(f"{where}: row {b} position_ids[{t}] = {int(pos[b, t])}, not {t}: packed sequences "
                          f"(positions that restart) are not judgeable (the engine attends causally across the row)")
    rows = torch.where(mask == 1, ids, torch.full_like(ids, -1))
    if labels is not None:
        lab = torch.as_tensor(labels).to(torch.int64)
        if lab.shape != ids.shape:
            raise Refused(f"{where}: labels of shape {list(lab.shape)}, input_ids {list(ids.shape)}")
        real = mask[:, 1:] == 1
        tl = lab[:, 1:]
        ignored = tl == IGNORE
        if bool((ignored & real).any()):
            b, t = (int(x) for x in (ignored & real).nonzero()[0])
            raise Refused(f"{where}: row {b} labels[{t + 1}] = -100 on a real token (prompt masking): the engine "
                          f"ignores a target only where its input is padding; not judgeable yet")
        wrong = ~ignored & ((tl != ids[:, 1:]) | ~real)
        if bool(wrong.any()):
            b, t = (int(x) for x in wrong.nonzero()[0])
            raise Refused(f"{where}: row {b} labels[{t + 1}] = {int(tl[b, t])}, input_ids[{t + 1}] = "
                          f"{int(ids[b, t + 1])}: a label is the input id it predicts (the model shifts) or -100")
    return rows.to(torch.int32)


def token_loss_sum(logits, labels):
    """(Σ token cross entropies, target count) of a causal LM's logits (B, T, V) against labels (B, T) with -100
    ignored, shifted as Hugging Face's loss is (position t predicts labels[t + 1]), in fp32: the loss_sum and
    targets Recorder.loss wants. The objective to backpropagate is loss_sum / N_global * gradient_divisor."""
    shift = logits[:, :-1, :].float().reshape(-1, logits.shape[-1])
    target = torch.as_tensor(labels)[:, 1:].reshape(-1).to(shift.device)
    loss = torch.nn.functional.cross_entropy(shift, target, ignore_index=IGNORE, reduction="sum")
    return loss, int((target != IGNORE).sum())
