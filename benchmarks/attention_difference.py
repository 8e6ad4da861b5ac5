"""How differently do continuous and softmax attention read the same trained weights on PhysioNet 2012?

    python benchmarks/attention_difference.py                   # the seed-1 twins of benchmarks/early_training.py
    python benchmarks/attention_difference.py --run runs/early/physionet2012_irregular_continuous_s1 --stays 800

For a trained irregular model (its run's best validation checkpoint), every attention call of a forward
pass over validation stays (the test split is not read) is run twice more on the same queries, keys, sink
and knot times, once with each weighting, with one-hot values, which turns each output row into that
query's attention weights over [sink, key 1, ..., key L]. Reported per kind of call (the temporal
self-attention within a variable's history, the decoder's cross-attention from forecast queries to that
history): the mean total-variation distance ``0.5 * sum |w_continuous - w_softmax|`` over query rows and
heads (0: the same weights, 1: disjoint), by the number of keys L a row reads, the same distance over the keys alone (each row's
weights on the keys renormalised to one: where in the history each looks), and the weight each puts
on the sink. Rows with no
keys (variables never observed: both read the sink alone) and padded queries are left out. A model with
the series sequence (``series_layers``) has two more kinds, "series self" (self-attention over the
series' distinct observation times, all variables in one sequence: longer and denser) and "series
cross" (forecast queries to it). Appends one JSON line per model to ``--out``.
"""
from __future__ import annotations

import argparse
import collections
import json
import pathlib
import re
import sys
import time
import warnings
from typing import Optional, Sequence

import torch

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.run_protocol import best_checkpoint, git_commit  # noqa: E402

from tsattn.nn.attention import MultiHeadAttention  # noqa: E402

BUCKETS = ((1, 1), (2, 3), (4, 7), (8, 15), (16, 10**9))
KINDS = ("self", "cross", "series self", "series cross")
SERIES_LAYER = re.compile(r"(^|\.)series_(blocks|cross)\.")


def bucket_name(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else (f"{lo}+" if hi >= 10**9 else f"{lo}-{hi}")


class Probe:
    """Wraps ``MultiHeadAttention.attend``: the model's own output, plus both weightings' rows."""

    def __init__(self, series_modules: Sequence[MultiHeadAttention] = ()) -> None:
        self.series = {id(m) for m in series_modules}  # layers of the series sequence: kinds of their own
        self.query_mask: Optional[torch.Tensor] = None  # [B, M] real forecast queries of the current batch
        self.tv = collections.defaultdict(float)      # (kind, bucket) -> summed distance
        self.rows = collections.defaultdict(int)
        self.tv_keys = collections.defaultdict(float)  # (kind, bucket) -> the same over the keys alone
        self.sink = collections.defaultdict(float)    # (kind, attention) -> summed sink weight
        self.original = MultiHeadAttention.attend

    def __enter__(self) -> "Probe":
        probe = self

        def attend(module, q, k, v, positions=None, memory_positions=None, key_lengths=None):
            out = probe.original(module, q, k, v, positions, memory_positions, key_lengths)
            probe.record(module, q, k, v, positions, memory_positions, key_lengths)
            return out

        MultiHeadAttention.attend = attend
        return self

    def __exit__(self, *exc) -> None:
        MultiHeadAttention.attend = self.original

    def weights(self, module, attention, q, k, v, positions, memory_positions, key_lengths):
        B, H, M, D = q.shape
        N = k.shape[2]
        onehot = torch.eye(N + 1, dtype=q.dtype, device=q.device)
        sink_value = onehot[0].view(1, 1, 1, N + 1)
        k0, _ = module.sink(k, v)
        own_kind = module._attention
        module.sink.forward = lambda k_, v_: (k0, sink_value)                   # the sink's value: one-hot 0
        module._attention = attention
        try:
            return self.original(module, q, k, onehot[1:].expand(B, H, N, N + 1), positions, memory_positions,
                                 key_lengths)                                   # [B, H, M, N + 1]
        finally:
            del module.sink.forward                                             # the class's forward again
            module._attention = own_kind

    def record(self, module, q, k, v, positions, memory_positions, key_lengths) -> None:
        B, H, M, D = q.shape
        N = k.shape[2]
        kind = "self" if (memory_positions is positions and M == N) else "cross"
        series = id(module) in self.series
        lengths = key_lengths if key_lengths is not None else torch.full((B,), N, device=q.device)
        # positions are the same tensor for self-attention: pass it twice, as the model does
        args = (q, k, v, positions, positions if kind == "self" else memory_positions, key_lengths)
        if module.softmax_sink is False:
            return                                                           # no shared sink to compare
        w = {a: self.weights(module, a, *args) for a in ("continuous", "softmax")}
        tv = 0.5 * (w["continuous"] - w["softmax"]).abs().sum(-1)             # [B, H, M]
        keys_only = {a: x[..., 1:] / x[..., 1:].sum(-1, keepdim=True).clamp_min(1e-30) for a, x in w.items()}
        tv_keys = 0.5 * (keys_only["continuous"] - keys_only["softmax"]).abs().sum(-1)
        if kind == "self":
            valid = torch.arange(M, device=q.device)[None, :] < lengths[:, None]          # [B, M]
        elif series:                     # queries in the batch's own [B, Ny] layout: padding is not zero
            if self.query_mask is None or tuple(self.query_mask.shape) != (B, M):
                raise ValueError("a series cross-attention needs the batch's y_mask: set Probe.query_mask")
            valid = self.query_mask.to(q.device)
        else:
            valid = q.abs().sum(-1).amax(1) > 0                                           # [B, M]: real queries
        kind = f"series {kind}" if series else kind
        valid = valid & (lengths[:, None] > 0)
        L = lengths[:, None].expand(B, M)
        for lo, hi in BUCKETS:
            sel = valid & (L >= lo) & (L <= hi)                                          # [B, M]
            if sel.any():
                self.tv[(kind, bucket_name(lo, hi))] += float(tv.permute(0, 2, 1)[sel].sum())
                self.tv_keys[(kind, bucket_name(lo, hi))] += float(tv_keys.permute(0, 2, 1)[sel].sum())
                self.rows[(kind, bucket_name(lo, hi))] += int(sel.sum()) * H
        for a in ("continuous", "softmax"):
            self.sink[(kind, a)] += float(w[a][..., 0].permute(0, 2, 1)[valid].sum())


def series_layers(net: torch.nn.Module) -> list[MultiHeadAttention]:
    """The attention layers of the series sequence (each member's, in an ``ensemble=k`` model, whose
    layers are named ``members.<i>.series_blocks...``)."""
    return [m for name, m in net.named_modules() if isinstance(m, MultiHeadAttention) and SERIES_LAYER.search(name)]


def analyse(run: pathlib.Path, stays: int, threads: int) -> dict:
    from tsattn import Forecaster

    torch.set_num_threads(threads)
    ckpt = best_checkpoint(run)
    f = Forecaster.load(ckpt)
    dm = f._datamodule(None)
    dm.setup("test")
    module = f.module.eval()
    series = series_layers(module.net)
    start, seen = time.perf_counter(), 0
    with Probe(series) as probe, torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for batch in dm.evaluation_loader("val"):
            probe.query_mask = batch["y_mask"]
            module.task.forward(module, batch)
            seen += int(batch["y_var"].shape[0])
            if seen >= stays:
                break
    table = {f"{kind} L={b}": {"rows": probe.rows[(kind, b)], "tv": probe.tv[(kind, b)] / probe.rows[(kind, b)],
                               "tv_keys": probe.tv_keys[(kind, b)] / probe.rows[(kind, b)]}
             for kind in KINDS for b in (bucket_name(*x) for x in BUCKETS) if probe.rows[(kind, b)]}
    total = {kind: n for kind in KINDS if (n := sum(probe.rows[(kind, bucket_name(*x))] for x in BUCKETS))}
    mean = {kind: sum(probe.tv[(kind, bucket_name(*x))] for x in BUCKETS) / total[kind] for kind in total}
    mean_keys = {kind: sum(probe.tv_keys[(kind, bucket_name(*x))] for x in BUCKETS) / total[kind] for kind in total}
    sink = {f"{kind} {a}": probe.sink[(kind, a)] / total[kind]                          # per row and head
            for kind in total for a in ("continuous", "softmax")}
    return {"run": str(run.relative_to(ROOT) if run.is_relative_to(ROOT) else run), "checkpoint": ckpt.name,
            "trained_with": module.hparams.attention, "stays": seen, "mean_tv": mean, "mean_tv_keys": mean_keys, "by_keys": table,
            "mean_sink_weight": sink, "seconds": time.perf_counter() - start, "commit": git_commit(),
            "date": time.strftime("%Y-%m-%d %H:%M")}


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=pathlib.Path, action="append",
                        help="a run folder with checkpoints/ (default: the seed-1 twins under runs/early)")
    parser.add_argument("--stays", type=int, default=800, help="validation stays to read (from the first)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "attention_difference.jsonl")
    args = parser.parse_args(argv)
    runs = args.run or [ROOT / "runs" / "early" / f"physionet2012_irregular_{a}_s1" for a in ("continuous", "softmax")]
    for run in runs:
        row = analyse(run.resolve(), args.stays, args.threads)
        with open(args.out, "a") as fh:
            fh.write(json.dumps(row) + "\n")
        print(json.dumps(row, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
