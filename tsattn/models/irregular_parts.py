"""The building blocks of ``IrregularTransformer`` (``tsattn.models.irregular``): argument checks, the
training augmentation, the ragged layouts (knots grouped by (series, variable) and bucketed by length; patches;
a series' distinct times), the attention blocks and the optional paths' computations (patch tokens, the
time-local variable block, the series sequence) and the query decoder's grouped cross-attention.

Functions here take the modules they use as arguments, so that the parameters stay where the model created
them (its state-dict keys and the order its weights are drawn in do not depend on this file).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import torch
from torch import Tensor, nn

from ..nn import Dropout, FeedForward, MultiHeadAttention

RESIDUAL_STARTS = ("zero", "mean")


def _check_residual_start(residual_start: str, residual: bool) -> str:
    if residual_start not in RESIDUAL_STARTS:
        raise ValueError(f"`residual_start` must be one of {RESIDUAL_STARTS}, got {residual_start!r}")
    if residual_start != "zero" and not residual:
        raise ValueError(f"`residual_start={residual_start!r}` says where the residual form starts for a variable "
                         "never observed in the history: set residual=True too (or leave residual_start 'zero')")
    return residual_start


def _residual_start(last: Tensor, has: Tensor, start_value: Optional[Tensor], var: Tensor) -> Tensor:
    """Where each query's residual starts [Q, 1]: its variable's last value ``last`` [Q, 1] (0 if never observed,
    ``has`` [Q] 0), or, with ``start_value`` [V], that variable's value there when never observed."""
    if start_value is None:
        return last
    return torch.where(has[:, None] > 0, last, start_value[var.long()].to(last.dtype)[:, None])


def _check_count(name: str, value: Optional[int], *, optional: bool = False) -> Optional[int]:
    if optional and value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"`{name}` must be {'None or ' if optional else ''}an int >= 0, got {value!r}")
    return value


def _check_length(name: str, value: Optional[float]) -> Optional[float]:
    """None, or a positive finite length of time as a float (``patch_length``, ``token_length``)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                              or not (value > 0 and math.isfinite(value))):
        raise ValueError(f"`{name}` must be None or a positive length of time, got {value!r}")
    return None if value is None else float(value)


def _check_rates(**rates: float) -> tuple[float, ...]:
    for name, rate in rates.items():
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"`{name}` must be a probability in [0, 1), got {rate!r}")
    return tuple(float(rate) for rate in rates.values())


def drop_history(x_var: Tensor, x_mask: Tensor, p_observation: float, p_variable: float, n_variables: int) -> Tensor:
    """A training augmentation: ``x_mask`` [B, Nx] with each real history observation dropped with probability
    ``p_observation`` and each series' whole history of a variable dropped with probability ``p_variable``
    (then its targets are forecast as those of a variable the history never showed). Draws from torch's RNG."""
    keep = x_mask
    if p_observation > 0:
        keep = keep & (torch.rand(x_mask.shape, device=x_mask.device) >= p_observation)
    if p_variable > 0:
        kept_variables = torch.rand(x_mask.shape[0], n_variables, device=x_mask.device) >= p_variable   # [B, V]
        keep = keep & torch.gather(kept_variables, 1, x_var.long().clamp(0, n_variables - 1))
    return keep




def _group(keys: Tensor, mask: Tensor, n_keys: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Group the valid elements of ``keys`` [B, N] (values in [0, n_keys)) by key, keeping their order.

    Returns (order, key, rank, counts): ``order`` [E] indexes the flattened elements, grouped by key
    and in their original order within a key; ``key`` [E] and ``rank`` [E] (0-based place within
    the key) of those elements; ``counts`` [n_keys] elements per key.
    """
    flat = torch.where(mask, keys, torch.full_like(keys, n_keys)).reshape(-1)
    sorted_keys, order = torch.sort(flat, stable=True)
    valid = int(mask.sum())
    order, sorted_keys = order[:valid], sorted_keys[:valid]
    counts = torch.bincount(sorted_keys, minlength=n_keys)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.arange(valid, device=keys.device) - starts[sorted_keys]
    return order, sorted_keys, rank, counts


class _Buckets:
    """Observed rows (keys with at least one element), grouped by length into power-of-two buckets.

    Bucket k holds the rows whose length is in (2^(k-1), 2^k] (up to ``max_buckets`` buckets; the last
    takes every longer row), so a row is padded to at most twice its length. For a key k with an
    element count > 0: ``bucket_of[k]`` and ``slot_of[k]`` (its row in the bucket); ``rows[b]`` [R_b]
    the keys of bucket b (by length) and ``width[b]`` its longest row.
    """

    def __init__(self, counts: Tensor, max_buckets: int) -> None:
        observed = torch.nonzero(counts > 0).squeeze(1)
        observed = observed[torch.argsort(counts[observed], stable=True)]       # short rows first
        lengths = counts[observed]
        level = torch.ceil(torch.log2(lengths.double())).long().clamp(max=max(1, max_buckets) - 1)
        self.bucket_of = torch.full_like(counts, -1)
        self.slot_of = torch.full_like(counts, -1)
        self.rows: list[Tensor] = []
        self.width: list[int] = []
        for k in torch.unique(level).tolist():
            rows = observed[level == k]
            self.bucket_of[rows] = len(self.rows)
            self.slot_of[rows] = torch.arange(rows.numel(), device=counts.device)
            self.rows.append(rows)
            self.width.append(int(counts[rows[-1]]))

    def scatter(self, values: Tensor, key: Tensor, rank: Tensor, bucket: int, fill: float = 0.0) -> Tensor:
        """Elements ``values`` [E, ...] (grouped by ``key``, place ``rank``) of one bucket -> [R_b, W_b, ...]."""
        sel = self.bucket_of[key] == bucket
        out = values.new_full((self.rows[bucket].numel(), self.width[bucket], *values.shape[1:]), fill)
        out[self.slot_of[key[sel]], rank[sel]] = values[sel]
        return out

    def gather(self, padded: list[Tensor], key: Tensor, rank: Tensor) -> Tensor:
        """The inverse of ``scatter`` over all buckets: ``padded[b]`` [R_b, W_b, ...] -> elements [E, ...]."""
        out = padded[0].new_zeros((key.numel(), *padded[0].shape[2:]))
        for b, rows in enumerate(padded):
            sel = torch.nonzero(self.bucket_of[key] == b).squeeze(1)
            out = out.index_copy(0, sel, rows[self.slot_of[key[sel]], rank[sel]])
        return out


POSITIONS = ("time", "rows")


class _PatchLayout(NamedTuple):
    """Where the knots sit for the time-local variable block (``patch_cells``)."""
    cell: Tensor     # [E] each knot's observed (series, patch, variable) cell, in 0..C-1
    pair: Tensor     # [C] each cell's (series, patch) set, in 0..S-1
    var: Tensor      # [C] each cell's variable
    mid: Tensor      # [S] each set's patch centre time
    number: Tensor   # [C] knots per cell
    empty: Tensor    # [S, V] bool, True where the set has no knot of that variable


def patch_index(time: Tensor, length: float) -> Tensor:
    """The history patch of each time (times and ``length`` scaled): patch p holds [-(p+1) L, -p L); a time
    >= 0 goes to patch 0."""
    return (torch.ceil(-time / length) - 1).clamp(min=0).long()


def _distinct_ranks(batch: Tensor, time: Tensor, n_series: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Elements (series ``batch`` [E], ``time`` [E]) -> (slot [E]: the rank of the element's time among
    its series' distinct times, counts [n_series]: distinct times per series, and per distinct
    (series, time) pair, sorted: its time [U], series [U] and rank [U])."""
    # Sorted by (series, time) with two stable sorts: torch.unique(dim=0) on the pairs gives the same
    # answer but compares rows one by one on the CPU (thousands of small ops per PhysioNet batch).
    order = torch.argsort(time, stable=True)
    order = order[torch.argsort(batch[order], stable=True)]                   # [E] by (series, time)
    series, times = batch[order].long(), time[order]
    new = torch.ones_like(series, dtype=torch.bool)                           # first element of a pair
    new[1:] = (series[1:] != series[:-1]) | (times[1:] != times[:-1])
    pair = torch.empty_like(series).index_copy_(0, order, torch.cumsum(new.long(), 0) - 1)   # [E] -> [U]
    owner = series[new]
    counts = torch.bincount(owner, minlength=n_series)
    first = torch.cumsum(counts, 0) - counts
    rank = torch.arange(owner.shape[0], device=time.device) - first[owner]
    return rank[pair], counts, times[new], owner, rank


def distinct_times(batch: Tensor, time: Tensor, n_series: int) -> tuple[Tensor, Tensor, Tensor, int]:
    """The distinct times of each series, in order: elements (series ``batch`` [E], ``time`` [E]) ->
    (slot [E], counts [n_series], times [n_series, T], width T): element e lies at
    ``times[batch[e], slot[e]] == time[e]``; row b holds its ``counts[b]`` distinct times increasing, then
    padding (times continuing one apart after the last, so that a row always increases).
    """
    if time.numel() == 0:
        return (torch.zeros(0, dtype=torch.long, device=time.device),
                torch.zeros(n_series, dtype=torch.long, device=time.device), time.new_zeros(n_series, 1), 1)
    slot, counts, unique, owner, rank = _distinct_ranks(batch, time, n_series)
    width = max(1, int(counts.max()))
    is_last = rank == counts[owner] - 1
    last = time.new_zeros(n_series).index_copy(0, owner[is_last], unique[is_last])
    steps = torch.arange(width, device=time.device, dtype=time.dtype)
    times = last[:, None] + steps[None, :] + 1.0 - counts[:, None].to(time.dtype)   # padding after the last
    times[owner, rank] = unique
    return slot, counts, times, width


def query_pattern(series: Tensor, time: Tensor, var: Tensor, key: Tensor, counts: Tensor, n_series: int,
                  n_variables: int) -> Tensor:
    """What a query can read from the other queries (``IrregularTransformer(query_pattern=True)``): per query
    (series ``series`` [Q], ``time`` [Q], variable ``var`` [Q], (series, variable) ``key`` [Q]; ``counts``: queries
    per key), [Q, V + 1]: which variables its series requests at the same time (0 / 1, itself included), then
    log(1 + n), n the queries of its (series, variable)."""
    out = time.new_zeros(time.shape[0], n_variables + 1)
    if time.numel() == 0:
        return out
    slot, per_series, _, owner, _ = _distinct_ranks(series, time, n_series)
    pair = (torch.cumsum(per_series, 0) - per_series)[series] + slot               # [Q]: its (series, time)
    together = time.new_zeros(owner.shape[0], n_variables)
    together[pair, var] = 1.0
    out[:, :n_variables] = together[pair]
    out[:, n_variables] = torch.log1p(counts[key].to(time.dtype))
    return out


def row_positions(time: Tensor, mask: Tensor, *, past: bool) -> Tensor:
    """Times replaced by the rank of their distinct time within each sample: what a model that reads
    rows as evenly spaced sees. ``past``: history, the latest time -> -1, the one before -> -2, ...;
    else targets, the earliest -> 0, the next -> 1, ... (padding -> 0).

    Args:
        time: [B, N]; mask: [B, N] bool (True = real).
    """
    B = time.shape[0]
    batch = torch.arange(B, device=time.device)[:, None].expand_as(time)[mask]
    slot, counts, *_ = _distinct_ranks(batch, time[mask], B)
    position = (slot - counts[batch]) if past else slot
    return time.new_zeros(time.shape).masked_scatter(mask, position.to(time.dtype))


class _Block(nn.Module):
    """Pre-norm attention block: x + attention(LN(x)) (self, or cross to ``memory``), then x + FFN(LN(x))."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int, dropout: float, *, attention: str, sink: str,
                 rope: bool, rope_base: float) -> None:
        super().__init__()
        self.norm_attn = nn.LayerNorm(d_model)
        # The sink always joins softmax as one more key: a row with no real key then reads it alone, as
        # continuous attention does.
        self.attn = MultiHeadAttention(d_model, n_heads, attention=attention, sink=sink, rope=rope,
                                       softmax_sink=True, proj_dropout=dropout, rope_base=rope_base)
        self.norm_ffn = nn.LayerNorm(d_model)
        self.ff = FeedForward(d_model, d_ff, dropout)
        self.dropout = Dropout(dropout)

    def forward(self, x: Tensor, positions: Optional[Tensor] = None, *, memory: Optional[Tensor] = None,
                memory_positions: Optional[Tensor] = None, key_lengths: Optional[Tensor] = None) -> Tensor:
        x = x + self.attn(self.norm_attn(x), positions, memory=memory, memory_positions=memory_positions,
                          key_lengths=key_lengths)
        return x + self.dropout(self.ff(self.norm_ffn(x)))


def read_series_sequence(block: _Block, x: Tensor, q_order: Tensor, y_time: Tensor, memory: Tensor,
                         times: Tensor, counts: Tensor) -> Tensor:
    """``block`` (a cross-attention block) from the flat queries x [Q, d] (at ``q_order`` of the padded
    [B, Ny] query layout, times ``y_time`` [B, Ny]) to the series sequence ``memory`` [B, T, d] (``times``
    [B, T], ``counts`` [B] real tokens) -> [Q, d]. As ``block(padded queries, memory=...)``, but only the
    attention core runs on the padded layout; norms, projections and the feed-forward network run on the
    real queries alone (PhysioNet: about half of the padded layout is padding)."""
    attn = block.attn
    (B, Ny), (H, D), d = y_time.shape, (attn.n_heads, attn.head_dim), x.shape[-1]
    q = x.new_zeros(B * Ny, d).index_copy(0, q_order, attn.project_query(block.norm_attn(x)))
    q = q.view(B, Ny, H, D).transpose(1, 2)                                          # [B, H, Ny, D]
    k, v = (t.transpose(1, 2) for t in attn.project_memory(memory))                  # [B, H, T, D]
    o = attn.attend(q, k, v, y_time, times, counts)                                  # [B, H, Ny, D]
    x = x + attn.output(o.transpose(1, 2).reshape(B * Ny, d)[q_order])
    return x + block.dropout(block.ff(block.norm_ffn(x)))


def _set_attention_layer(d_model: int, n_heads: int, d_ff: int, dropout: float) -> nn.Module:
    """Attention over a set of variables (pre-norm, GELU): plain softmax, not switched by ``set_attention``."""
    return nn.TransformerEncoderLayer(d_model, n_heads, d_ff, dropout, activation="gelu", batch_first=True,
                                      norm_first=True)


class TimeFeatures(nn.Module):
    """Features of a time t: one linear term and ``n - 1`` sines with learned frequencies and phases
    (as mTAND's learned time embedding), mapped to ``d_model``.

    Args:
        n: number of features.
        d_model: output width.
    """

    def __init__(self, n: int, d_model: int) -> None:
        super().__init__()
        self.linear = nn.Linear(1, 1)
        self.periodic = nn.Linear(1, n - 1)
        self.out = nn.Linear(n, d_model)

    def forward(self, t: Tensor) -> Tensor:
        """t: [...] -> [..., d_model]."""
        t = t[..., None]
        return self.out(torch.cat([self.linear(t), torch.sin(self.periodic(t))], dim=-1))


def pool_tokens(knots: Tensor, key: Tensor, time: Tensor, n_keys: int, length: float, offset: TimeFeatures,
                count: nn.Linear) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """Patch tokens (``token_length``): the knots [E, d] of keys ``key`` [E] ((series, variable) rows) at scaled
    ``time`` [E] -> one token per observed (key, patch) of scaled ``length``: the mean of its knots, each plus
    ``offset`` of its time within the token, plus ``count`` of log(number of knots).

    Returns (tokens [C, d], key [C], rank [C] (place within the key, in time order), counts [n_keys] tokens per
    key, times [C] (the mean time of the token's observations)).
    """
    patch = patch_index(time, length)
    n_patches = int(patch.max()) + 1
    cells, cell = torch.unique(key * n_patches + (n_patches - 1 - patch), return_inverse=True)   # [C], [E]
    number = torch.bincount(cell, minlength=cells.numel()).to(time.dtype)                # [C]
    mid = time.new_zeros(cells.numel()).index_add(0, cell, time) / number                # [C]
    total = knots.new_zeros(cells.numel(), knots.shape[-1]).index_add(0, cell, knots + offset(time - mid[cell]))
    tokens = total / number[:, None] + count(torch.log(number)[:, None])
    c_key = cells // n_patches                                                             # sorted
    counts = torch.bincount(c_key, minlength=n_keys)
    rank = torch.arange(cells.numel(), device=key.device) - (torch.cumsum(counts, 0) - counts)[c_key]
    return tokens, c_key, rank, counts, mid


def patch_cells(series: Tensor, var: Tensor, time: Tensor, n_variables: int, length: float) -> _PatchLayout:
    """The time-local variable block's layout (``_PatchLayout``) of the knots (``series``, ``var``, ``time``
    [E], times and ``length`` scaled), the same for every encoder layer. Patch p holds the times in
    [-(p+1) L, -p L) (L the patch length; a time >= 0 goes to patch 0)."""
    V = n_variables
    patch = patch_index(time, length)                                              # [E]
    n_patches = int(patch.max()) + 1
    cell_id = (series * n_patches + patch) * V + var                                     # [E]
    cells, cell = torch.unique(cell_id, return_inverse=True)                             # sorted, [C]
    pairs, pair = torch.unique(cells // V, return_inverse=True)                          # [S], [C]
    mid = -((pairs % n_patches).to(time.dtype) + 0.5) * length                           # [S]
    var = cells % V
    number = torch.bincount(cell, minlength=cells.numel()).to(time.dtype)               # [C]
    empty = torch.ones(pairs.numel(), V, dtype=torch.bool, device=time.device)
    empty[pair, var] = False
    return _PatchLayout(cell, pair, var, mid, number, empty)


def patch_block(flat: Tensor, layout: _PatchLayout, into: nn.Module, patch_time: TimeFeatures, mix: nn.Module,
                out: nn.Module) -> Tensor:
    """The time-local variable block: encoded knots [E, d] -> what it adds to each knot [E, d]. Per (series,
    patch) set, each observed variable's state (``into`` of its knots' mean, plus ``patch_time`` of the patch
    centre) is updated by ``mix`` (attention over the set) and mapped back by ``out``."""
    cell, pair, var = layout.cell, layout.pair, layout.var
    total = flat.new_zeros(var.numel(), flat.shape[-1]).index_add(0, cell, flat)     # [C, d]
    grid = flat.new_zeros(*layout.empty.shape, flat.shape[-1])                        # [S, V, d]
    grid[pair, var] = into(total / layout.number[:, None]) + patch_time(layout.mid)[pair]
    mixed = mix(grid, src_key_padding_mask=layout.empty)                             # [S, V, d]
    return out(mixed[pair, var])[cell]                                                # [E, d]


def series_memory(encoded: Tensor, series: Tensor, time: Tensor, n_series: int, into: nn.Module,
                  blocks: nn.ModuleList, norm: nn.Module) -> tuple[Tensor, Tensor, Tensor]:
    """The series sequence: encoded knots [E, d] of series ``series`` [E] at ``time`` [E] -> one token per
    distinct time of a series (``into`` of the mean of the knots observed then), read by ``blocks``.

    Returns (memory [B, T, d] normalised by ``norm``, times [B, T], counts [B] distinct times per series).
    """
    slot, counts, times, width = distinct_times(series, time, n_series)
    d = encoded.shape[-1]
    total = encoded.new_zeros(n_series, width, d).index_put((series, slot), encoded, accumulate=True)
    number = encoded.new_zeros(n_series, width).index_put((series, slot), encoded.new_ones(series.numel()),
                                                          accumulate=True)
    x = into(total / number.clamp(min=1.0)[..., None])
    for block in blocks:
        x = block(x, times, key_lengths=counts)
    return norm(x), times, counts


class _QueryGroup(NamedTuple):
    """Query rows (series, variable) that share a key layout (``query_groups``)."""
    index: Tensor              # [Q_g] the group's flat queries
    slot: Tensor               # [Q_g] each query's row in the group
    rank: Tensor               # [Q_g] its place within the row
    width: int                 # the longest row's queries
    times: Tensor              # [R_g, width] query times (padded)
    bucket: Optional[int]      # the history bucket the rows read (None: never observed, the sink alone)
    slots: Optional[Tensor]    # [R_g] the rows' slots in that bucket (None: never observed)
    memory_times: Tensor       # [R_g, W] the knots' times
    memory_lengths: Tensor     # [R_g] the knots per row


def query_groups(buckets: _Buckets, counts: Tensor, times: list[Tensor], lengths: list[Tensor], q_key: Tensor,
                 q_rank: Tensor, q_counts: Tensor, q_time: Tensor) -> list[_QueryGroup]:
    """The flat queries (row ``q_key`` [Q], place ``q_rank`` [Q], scaled time ``q_time`` [Q]; ``q_counts``
    queries per row) in groups that share a key layout: one per history bucket (``buckets``, the knots'
    ``times`` and ``lengths`` per bucket; ``counts`` knots per row), and one for variables never observed."""
    groups = []
    for b in range(len(buckets.rows) + 1):
        sel = (buckets.bucket_of[q_key] == b) if b < len(buckets.rows) else (counts[q_key] == 0)
        index = torch.nonzero(sel).squeeze(1)                                         # [Q_g] flat queries
        if index.numel() == 0:
            continue
        g_rows, g_slot = torch.unique(q_key[index], return_inverse=True)
        width = int(q_counts[g_rows].max())
        g_times = q_time.new_zeros(g_rows.numel(), width)
        g_times[g_slot, q_rank[index]] = q_time[index]
        if b < len(buckets.rows):
            slots = buckets.slot_of[g_rows]
            layout = (b, slots, times[b][slots], lengths[b][slots])
        else:
            layout = (None, None, q_time.new_zeros(g_rows.numel(), 1),
                      torch.zeros(g_rows.numel(), dtype=torch.long, device=q_key.device))
        groups.append(_QueryGroup(index, g_slot, q_rank[index], width, g_times, *layout))
    return groups


def decode_layer(block: _Block, x: Tensor, memory: list[Tensor], groups: list[_QueryGroup]) -> Tensor:
    """One decoder block: the flat queries x [Q, d] cross-attend to their rows' knots (``memory[b]`` [R_b, W_b,
    d] per bucket), then the feed-forward network. Only the attention core runs on each group's padded
    [rows, queries] layout; norms, projections and the feed-forward network run on the flat queries."""
    attn, d = block.attn, x.shape[-1]
    H, D = attn.n_heads, attn.head_dim
    q_proj = attn.project_query(block.norm_attn(x))                                   # [Q, d]
    keys = [attn.project_memory(m) for m in memory]                                   # per bucket [R_b, W_b, H, D]
    o = torch.zeros_like(x)
    for g in groups:
        q = x.new_zeros(g.times.shape[0], g.width, d)
        q[g.slot, g.rank] = q_proj[g.index]
        q = q.view(q.shape[0], g.width, H, D).transpose(1, 2)                         # [R_g, H, M_g, D]
        if g.bucket is None:                                                          # the sink alone
            k = v = q.new_zeros(q.shape[0], H, 1, D)
        else:
            k, v = (t[g.slots].transpose(1, 2) for t in keys[g.bucket])               # [R_g, H, W_b, D]
        og = attn.attend(q, k, v, g.times, g.memory_times, g.memory_lengths)          # [R_g, H, M_g, D]
        og = og.transpose(1, 2).reshape(q.shape[0], g.width, d)
        o = o.index_copy(0, g.index, og[g.slot, g.rank])
    x = x + attn.output(o)
    return x + block.dropout(block.ff(block.norm_ffn(x)))
