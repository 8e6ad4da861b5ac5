"""A forecaster for irregular, sparse multivariate series: observations in, values at (time, variable) out.

    history: observations (time, variable, value), each variable at its own times, times relative to
             the forecast origin (history times < 0); padded, with a mask
      -> per observation: value embedding + variable embedding
      -> grouped by (series, variable): one sequence of knots per observed variable, at its real times
      -> n_layers x [
           temporal block, per variable sequence: attention over the variable's own knots (continuous:
             the integral runs over the real gaps, dt; softmax: the same tokens, the same RoPE) -> FFN
           variable block, per series: a state per variable (its knots' mean, or "not observed") is
             updated by attention over all V variables of the series (softmax over the set) and added
             back to the variable's knots ]
      -> per query (t, v): variable embedding + the variable's state + time features of t + the
           variable's last observed value and its age (zero and a flag when it was never observed)
           -> n_decoder_layers x [cross-attention to the knots of variable v (query time t vs knot
              times) -> FFN] -> Linear -> the forecast value at (t, v)
              (``residual=True``: -> + the variable's last observed value: the Linear forecasts the
              change since then, and starts at zero, i.e. at the last-observation forecast)
    ``series_layers=L`` adds the series sequence: one token per distinct history time of a series (the
    mean of the encoded knots observed at that time, whatever their variables), L temporal
    self-attention blocks over it (continuous: the integral runs over the gaps between the series'
    observation times), and after each decoder block a cross-attention from every query to it. The
    variable block only passes each variable's mean state; this path lets a query read when and in
    what order the other variables moved (a lab drawn with a vital-sign change, a ventilator setting
    with a blood gas).
    ``patch_length=L`` adds a time-local variable block to every encoder layer (a graph over the variables
    that changes with time): the history is cut into patches of length L counted back from the origin
    ([-L, 0), [-2L, -L), ...); per (series, patch) a state per variable observed in that patch (the mean of
    its knots there, plus the patch's time features) is updated by attention over the variables observed
    in the same patch (softmax over the set), and added back to those knots. The global variable block
    sees each variable's mean over the whole history; this one sees which variables moved together when.
    ``token_length=L`` makes the knots patch tokens: each variable's observations are pooled into one token
    per history patch of length L counted back from the origin (the patches of ``patch_length``): the mean
    of the observations' embeddings, each with learned features of its time within the patch, plus a
    learned function of how many there are; the token sits at the mean time of its observations. Every
    block then reads these tokens where it read the knots (the temporal attentions integrate over the
    gaps between patch tokens), as t-PatchGNN encodes a variable by its time patches. The last observed
    value and its age, which the queries read, still come from the observations themselves.

Why this shape. mTAND attends from reference times to every observation with learned time
embeddings; t-PatchGNN cuts each variable's observations into time patches, encodes each patch
with a transformer, passes messages between variables with a learned graph and decodes a query
from the variable's state and a time embedding. Here each variable keeps its own observation times
(no grid, no patch borders), so continuous attention integrates over the real time between a
variable's observations, and a burst of observations does not outweigh a sparse stretch by count;
the variable block plays the graph's part (a dense, input-dependent graph over the V variables);
queries are decoded from the variable's state and the query time, as in both, and also read the
variable's own history at the query's time by cross-attention. Only the temporal attentions (self
and cross) switch between softmax and continuous; the variable block attends over a set, which has
no time axis, and is softmax in both. Both attentions get the same time information: RoPE on the
real times and the query's time features.

No leakage: a query's forecast depends on the history and on that query's own time and variable
only (queries never attend to each other; target values never enter the model). The one exception is
the diagnostic ``query_pattern=True`` (see its argument), which is not meant for forecasting.

Efficiency: the sequences are short and ragged (PhysioNet: a variable has 1 to ~100 observations in
24 h, median 3), so the observed (series, variable) rows are grouped by length into power-of-two
buckets (at most ``n_buckets``), each padded to its own longest row (at most twice a row's length);
the padding is ignored exactly (``key_lengths``).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional

import torch
from torch import Tensor, nn

from ..nn import Dropout
from .baselines import variable_means
from .irregular_parts import (POSITIONS, TimeFeatures, _Block, _Buckets, _check_count, _check_length,
                              _check_rates, _check_residual_start, _group, _residual_start, _set_attention_layer,
                              decode_layer, drop_history, patch_block, patch_cells, pool_tokens, query_groups,
                              query_pattern, read_series_sequence, row_positions, series_memory)
from .patchtst import check_quantile_count, quantile_head
from .registry import register_model
from .value_scales import value_scales

__all__ = ["IrregularTransformer", "drop_history"]


# Forecaster("irregular") trains the PhysioNet configuration (configs/physionet2012/): continuous
# attention, a learned sink, RoPE on real times, the residual form (it starts at the last observation).
@register_model("irregular", task="observations", defaults=dict(
    attention="continuous", sink="learned", rope=True, lr=1e-3, lr_schedule="constant", batch_size=32,
    model_kwargs={"residual": True, "dropout": 0.0}))
class IrregularTransformer(nn.Module):
    """Forecasts observations of irregular multivariate series at requested (time, variable) points.

    Inputs are the observation batches of ``tsattn.data`` (times relative to the forecast origin,
    in the data's time unit; values scaled): see ``forward``. See the module docstring for the
    architecture and why it has this shape.

    Args:
        n_variables: number of variables V (variable ids are 0..V-1).
        attention: "continuous" or "softmax" for the temporal attentions (self and cross); switchable
            with ``tsattn.nn.set_attention`` (the variable block stays softmax).
        sink: "zeros", "first" or "learned" sink knot of the temporal attentions.
        rope: rotary position embedding on the real times in the temporal attentions.
        d_model: token width.
        n_heads: attention heads.
        n_layers: encoder layers (a temporal block and a variable block each).
        n_decoder_layers: cross-attention blocks of the query decoder.
        d_ff: feed-forward hidden width.
        dropout: dropout on embeddings, attention outputs and in the feed-forward networks.
        time_scale: times are multiplied by this before they enter the model (so that typical gaps
            are of order 1: for hours, 1).
        positions: "time" (the real times) or "rows": every sample's distinct times replaced by their
            rank (history -n..-1, targets 0, 1, ...), i.e. rows read as evenly spaced, as a
            regular-grid model reads them; for ablations (gaps become invisible).
        time_features: size of the learned time features of a query.
        rope_base: RoPE frequency base.
        n_buckets: most length buckets for the ragged variable sequences (speed only; any value
            gives the same result up to rounding).
        residual: forecast the change from the variable's last observed value in the history
            (for a variable never observed there, the change from ``residual_start``);
            the output layer starts at zero, so an untrained model forecasts the last observation.
            Persistence is a strong forecast for slowly moving variables (vital signs, lab values)
            and this keeps it within reach of the model from the first step.
        n_quantiles: None (one value per query, [B, Ny]) or Q: Q values per query ([B, Ny, Q]),
            e.g. the quantiles of a probabilistic forecast (with ``residual``, each is a change
            from the last value, all starting at it).
        median_index: which of the Q outputs is the point forecast (the median; default Q // 2):
            the others learn from the features detached (``QuantileHead``).
        n_static: K static covariates per series (``forward``'s ``static`` [B, 2K]: scaled values and
            known flags): a linear embedding added to every variable's state before the variable
            blocks, so that every history and query of the series reads it. 0: none (no weights).
        series_layers: None (no series sequence: the model as before, the same weights drawn) or L >= 0:
            the series sequence with L self-attention blocks (module docstring); its attentions are
            temporal, so they follow ``attention`` and ``set_attention``.
        patch_length: None (no time-local variable block: the model as before, the same weights drawn)
            or a positive length of time (the data's unit, as the times before ``time_scale``): a
            variable block per history patch of that length in every encoder layer (module docstring).
            Softmax over a set, like the global variable block: not switched by ``attention``.
        token_length: None (one token per observation, the knots: the model as before, the same weights
            drawn) or a positive length of time (the data's unit): one token per observed variable and
            history patch of that length (module docstring); fewer, denser tokens.
        residual_start: with ``residual``, where a variable never observed in the history starts: "zero"
            (0 in scaled units: the data's mean under standard scaling, its minimum under min-max; the model
            as before) or "mean" (the variable's mean over the fit's train samples, set when a fit starts:
            ``fit_statistics``; so that an untrained model forecasts exactly the last-observation baseline).
        history_dropout: in training only, drop each history observation with this probability (an
            augmentation; ``drop_history``). 0: off (the model as before).
        history_variable_dropout: in training only, drop a series' whole history of a variable with this
            probability, so that its targets are learnt as first values. 0: off.
        value_norm: "none" (the data's scale: the model as before) or "variable": each variable read as
            ``asinh((value - center) / spread)`` and forecast in steps of its typical change (a variable the
            history never showed: from its center, unless ``residual_start="mean"``); the scales are set when a
            fit starts (``fit_statistics``; ``tsattn.models.value_scales``).
        data_step: with ``value_norm="variable"``, a second output on the data's scale (starting at zero), so
            that a forecast can also move by amounts that are large for its variable. False: none.
        count_features: add a learned embedding of ``log(1 + n)``, ``n`` the number of a variable's observations
            in the history, to that variable's state (before the variable blocks; the queries read the state).
            The attentions average over a variable's knots (continuous attention over their time span), so
            how often a variable was measured (in clinical data, often how worried the staff were) is
            otherwise hard to read. False: none (the model as before, the same weights drawn).
        query_pattern: a diagnostic, not an input for forecasting: each query also reads which variables its
            series requests at the same time and how many queries its variable has (a learned embedding of
            ``query_pattern``'s features, added to the query). A forecast then depends on the other requested
            points; when the queries are the future observations (a benchmark's targets), that is the future
            measurement pattern (which labs were drawn together, how often a variable will be measured), which
            no one knows when forecasting, and which a model that puts the targets in its graph (GraFITi's
            target edges) reads too. For measuring what that pattern is worth. False: none (the model as
            before, the same weights drawn; a query's forecast depends on its own time and variable only).
    """

    def __init__(
        self,
        n_variables: int,
        *,
        attention: str = "continuous",
        sink: str = "learned",
        rope: bool = True,
        d_model: int = 64,
        n_heads: int = 4,
        n_layers: int = 2,
        n_decoder_layers: int = 1,
        d_ff: int = 128,
        dropout: float = 0.1,
        time_scale: float = 1.0,
        positions: str = "time",
        time_features: int = 16,
        rope_base: float = 10000.0,
        n_buckets: int = 8,
        residual: bool = False,
        n_quantiles: Optional[int] = None,
        median_index: Optional[int] = None,
        n_static: int = 0,
        series_layers: Optional[int] = None,
        patch_length: Optional[float] = None,
        token_length: Optional[float] = None,
        residual_start: str = "zero",
        history_dropout: float = 0.0,
        history_variable_dropout: float = 0.0,
        value_norm: str = "none",
        data_step: bool = False,
        count_features: bool = False,
        query_pattern: bool = False,
    ) -> None:
        super().__init__()
        check_quantile_count(n_quantiles)
        _check_count("n_static", n_static)
        if n_variables < 1:
            raise ValueError(f"`n_variables` must be >= 1, got {n_variables}")
        if not (time_scale > 0 and math.isfinite(time_scale)):
            raise ValueError(f"`time_scale` must be a positive number, got {time_scale}")
        if not isinstance(residual, bool):
            raise TypeError(f"`residual` must be True or False, got {residual!r}")
        self.n_variables = n_variables
        if positions not in POSITIONS:
            raise ValueError(f"`positions` must be one of {POSITIONS}, got {positions!r}")
        self.time_scale = float(time_scale)
        self.positions = positions
        self.n_buckets = int(n_buckets)
        temporal = dict(attention=attention, sink=sink, rope=rope, rope_base=rope_base)
        self.value_embedding = nn.Linear(1, d_model)
        self.variable_embedding = nn.Embedding(n_variables, d_model)
        self.not_observed = nn.Parameter(torch.zeros(d_model))
        self.dropout = Dropout(dropout)
        self.temporal = nn.ModuleList(_Block(d_model, n_heads, d_ff, dropout, **temporal) for _ in range(n_layers))
        self.summary_in = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        self.variable_mix = nn.ModuleList(_set_attention_layer(d_model, n_heads, d_ff, dropout)
                                          for _ in range(n_layers))
        self.summary_out = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        self.norm_memory = nn.LayerNorm(d_model)
        self.query_state = nn.Linear(d_model, d_model)
        self.query_time = TimeFeatures(time_features, d_model)
        self.query_last = nn.Linear(3, d_model)
        self.decoder = nn.ModuleList(_Block(d_model, n_heads, d_ff, dropout, **temporal)
                                     for _ in range(n_decoder_layers))
        self.norm_out = nn.LayerNorm(d_model)
        self.n_quantiles = n_quantiles
        self.head = quantile_head(d_model, 1, n_quantiles, median_index)
        self.residual = residual
        if residual:
            for param in self.head.parameters():
                nn.init.zeros_(param)
        self.n_static = n_static       # created last: a model without statics draws the same weights as before
        self.static_embedding = nn.Linear(2 * n_static, d_model) if n_static else None
        # created after the rest: None draws the same weights as before
        self.series_layers = _check_count("series_layers", series_layers, optional=True)
        if series_layers is not None:
            self.series_in = nn.Linear(d_model, d_model)
            self.series_blocks = nn.ModuleList(_Block(d_model, n_heads, d_ff, dropout, **temporal)
                                               for _ in range(series_layers))
            self.norm_series = nn.LayerNorm(d_model)
            self.series_cross = nn.ModuleList(_Block(d_model, n_heads, d_ff, dropout, **temporal)
                                              for _ in range(n_decoder_layers))
        else:
            self.series_cross = None
        self.patch_length = _check_length("patch_length", patch_length)   # created last, as above
        if patch_length is not None:
            self.patch_in = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
            self.patch_time = TimeFeatures(time_features, d_model)
            self.patch_mix = nn.ModuleList(_set_attention_layer(d_model, n_heads, d_ff, dropout)
                                           for _ in range(n_layers))
            self.patch_out = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        self.token_length = _check_length("token_length", token_length)   # created last, as above
        if token_length is not None:
            self.token_offset = TimeFeatures(time_features, d_model)
            self.token_count = nn.Linear(1, d_model)
        self.residual_start = _check_residual_start(residual_start, residual)   # "mean": a buffer set by fit_statistics
        self.register_buffer("start_value", torch.zeros(n_variables) if residual_start == "mean" else None)
        self.history_dropout, self.history_variable_dropout = _check_rates(
            history_dropout=history_dropout, history_variable_dropout=history_variable_dropout)
        self.value_scales = value_scales(value_norm, data_step, n_variables,   # None: the data's scale
                                         lambda: quantile_head(d_model, 1, n_quantiles, median_index))
        if not isinstance(count_features, bool):
            raise TypeError(f"`count_features` must be True or False, got {count_features!r}")
        self.count_embedding = nn.Linear(1, d_model) if count_features else None   # created last, as above
        if not isinstance(query_pattern, bool):
            raise TypeError(f"`query_pattern` must be True or False, got {query_pattern!r}")
        self.pattern_embedding = nn.Linear(n_variables + 1, d_model) if query_pattern else None   # last, as above

    def fit_statistics(self, loader: Iterable[dict[str, Tensor]], **facts: Any) -> None:
        """What the model takes from the fit's train samples (``Task.fit_statistics`` calls it): with
        ``residual_start="mean"``, each variable's mean over ``loader``'s batches (the last-observation
        forecast's value for a variable never observed); with ``value_norm="variable"``, each variable's
        center, spread and step (``variable_scales``); otherwise nothing, and ``loader`` is not read."""
        if self.start_value is not None:
            self.start_value.copy_(variable_means(loader, self.n_variables).to(self.start_value))
        if self.value_scales is not None:
            self.value_scales.fit(loader)

    def forward(
        self,
        x_time: Tensor,
        x_var: Tensor,
        x_value: Tensor,
        x_mask: Tensor,
        y_time: Tensor,
        y_var: Tensor,
        y_mask: Optional[Tensor] = None,
        static: Optional[Tensor] = None,
    ) -> Tensor:
        """Forecast the value of every query.

        Args:
            x_time: [B, Nx] history times relative to the forecast origin (< 0 for the past).
            x_var: [B, Nx] variable ids (int); x_value: [B, Nx] scaled values; x_mask: [B, Nx] bool,
                True for a real observation (padding is ignored).
            y_time: [B, Ny] query times relative to the origin; y_var: [B, Ny] their variable ids.
            y_mask: [B, Ny] bool, True for a real query (None = all).
            static: [B, 2 * n_static] the series' static covariates (scaled values, known flags);
                required when the model has them.

        Returns:
            [B, Ny] forecasts (scaled units); 0 at padded queries.
        """
        B, V = x_time.shape[0], self.n_variables
        if y_mask is None:
            y_mask = torch.ones_like(y_var, dtype=torch.bool)
        for name, var, mask in (("x_var", x_var, x_mask), ("y_var", y_var, y_mask)):
            if mask.any() and (int(var[mask].min()) < 0 or int(var[mask].max()) >= V):
                raise ValueError(f"{name} holds variable ids outside [0, {V}); build the model with n_variables=V")
        if self.training and (self.history_dropout or self.history_variable_dropout):
            x_mask = drop_history(x_var, x_mask, self.history_dropout, self.history_variable_dropout, V)
        dtype = self.value_embedding.weight.dtype
        if self.positions == "rows":
            x_time = row_positions(x_time.to(dtype), x_mask, past=True)
            y_time = row_positions(y_time.to(dtype), y_mask, past=False)
        x_time = x_time.to(dtype) * self.time_scale
        y_time = y_time.to(dtype) * self.time_scale
        d = self.variable_embedding.embedding_dim

        # -- history: one knot sequence per observed (series, variable) ------------------------------------
        keys = torch.arange(B, device=x_var.device)[:, None] * V + x_var.long()         # [B, Nx]
        order, key, rank, counts = _group(keys, x_mask, B * V)
        var_flat, time_flat = x_var.reshape(-1)[order].long(), x_time.reshape(-1)[order]
        value_flat = x_value.reshape(-1)[order].to(dtype)
        read_flat = value_flat if self.value_scales is None else self.value_scales.read(value_flat, var_flat)
        tokens_flat = self.value_embedding(read_flat[:, None]) + self.variable_embedding(var_flat)    # [E, d]
        observations = counts                                              # [B * V] per (series, variable)
        last = x_time.new_zeros(B * V, 3)                                  # value, time, value as read
        if order.numel():
            end = torch.cumsum(counts, 0) - 1                                               # last element of a key
            seen = torch.nonzero(counts > 0).squeeze(1)
            last[seen, 0] = value_flat[end[seen]]
            last[seen, 1] = time_flat[end[seen]]
            last[seen, 2] = read_flat[end[seen]]
            if self.token_length is not None:                  # the knots pooled into patch tokens
                tokens_flat, key, rank, counts, time_flat = pool_tokens(
                    tokens_flat, key, time_flat, B * V, self.token_length * self.time_scale, self.token_offset,
                    self.token_count)
                var_flat = key % V
        buckets = _Buckets(counts, self.n_buckets)
        tokens = [self.dropout(buckets.scatter(tokens_flat, key, rank, b)) for b in range(len(buckets.rows))]
        times = [buckets.scatter(time_flat, key, rank, b) for b in range(len(buckets.rows))]   # [R_b, W_b]
        lengths = [counts[rows] for rows in buckets.rows]                                         # [R_b]
        observed = (counts > 0).view(B, V, 1)
        state = self.variable_embedding.weight.expand(B, V, d) + torch.where(observed, 0.0, self.not_observed)
        if self.static_embedding is not None:
            if static is None or static.shape != (B, 2 * self.n_static):
                raise ValueError(f"this model reads {self.n_static} static covariates: pass static [B, "
                                 f"{2 * self.n_static}] (got {None if static is None else tuple(static.shape)})")
            state = state + self.static_embedding(static.to(dtype))[:, None, :]
        if self.count_embedding is not None:                      # how often each variable was observed
            state = state + self.count_embedding(torch.log1p(observations.to(dtype)).view(B, V, 1)) * observed

        patch_layout = None
        if self.patch_length is not None and order.numel():
            patch_layout = patch_cells(key // V, var_flat, time_flat, V, self.patch_length * self.time_scale)
        for layer, (temporal, summary_in, mix, summary_out) in enumerate(zip(
                self.temporal, self.summary_in, self.variable_mix, self.summary_out)):
            summary = tokens_flat.new_zeros(B * V, d)
            for b, rows in enumerate(buckets.rows):
                tokens[b] = temporal(tokens[b], times[b], key_lengths=lengths[b])          # [R_b, W_b, d]
                valid = torch.arange(buckets.width[b], device=x_var.device) < lengths[b][:, None]
                mean = (tokens[b] * valid[..., None]).sum(1) / lengths[b][:, None]         # [R_b, d]
                summary = summary.index_copy(0, rows, mean)
            state = mix(state + summary_in(summary).view(B, V, d) * observed)             # [B, V, d]
            back = summary_out(state).reshape(B * V, d)
            tokens = [t + back[rows][:, None, :] for t, rows in zip(tokens, buckets.rows)]
            if patch_layout is not None:                   # then the variables observed in the same patch
                local = patch_block(buckets.gather(tokens, key, rank), patch_layout, self.patch_in[layer],
                                    self.patch_time, self.patch_mix[layer], self.patch_out[layer])   # [E, d]
                tokens = [t + buckets.scatter(local, key, rank, b) for b, t in enumerate(tokens)]
        memory = [self.norm_memory(t) for t in tokens]
        if self.series_cross is not None:
            encoded = buckets.gather(tokens, key, rank) if order.numel() else tokens_flat   # [E, d]
            series = series_memory(encoded, key // V, time_flat, B, self.series_in, self.series_blocks,
                                   self.norm_series)

        # -- queries: decoded per (series, variable), reading that variable's knots -------------------------
        q_keys = torch.arange(B, device=y_var.device)[:, None] * V + y_var.long()         # [B, Ny]
        q_order, q_key, q_rank, q_counts = _group(q_keys, y_mask, B * V)
        q_time = y_time.reshape(-1)[q_order]
        has = (counts[q_key] > 0).float()
        q_last = last[q_key]                                                              # [Q, 3]
        last_features = torch.stack([q_last[:, 2], (q_time - q_last[:, 1]) * has, has], dim=1)     # [Q, 3]
        q_var = y_var.reshape(-1)[q_order].long()                                          # [Q]
        q_flat = (self.variable_embedding(q_var)
                  + self.query_state(state.reshape(B * V, d)[q_key])
                  + self.query_time(q_time) + self.query_last(last_features))            # [Q, d]
        if self.pattern_embedding is not None:          # the diagnostic: what the other queries say
            q_flat = q_flat + self.pattern_embedding(query_pattern(q_key // V, q_time, q_var, q_key, q_counts, B, V))

        groups = query_groups(buckets, counts, times, lengths, q_key, q_rank, q_counts, q_time)
        x = q_flat                                                                        # [Q, d]
        for layer, block in enumerate(self.decoder):
            x = decode_layer(block, x, memory, groups)
            if self.series_cross is not None:          # then every query reads all of its series' history
                x = read_series_sequence(self.series_cross[layer], x, q_order, y_time, *series)
        features = self.norm_out(x)
        out_flat = self.head(features)                                                    # [Q, 1 or n_quantiles]
        if self.value_scales is not None:      # each variable's forecast in its own steps
            out_flat = self.value_scales.forecast(out_flat, features, has > 0, q_var, residual=self.residual)
        if self.residual:      # a variable never observed: 0, its mean (residual_start) or its center (value_norm)
            start = self.start_value
            if start is None and self.value_scales is not None:
                start = self.value_scales.center
            out_flat = out_flat + _residual_start(q_last[:, :1], has, start, q_var)
        width = out_flat.shape[1]
        out = y_time.new_zeros(y_time.numel(), width)
        out[q_order] = out_flat
        out = out.view(*y_time.shape, width)
        return out if self.n_quantiles is not None else out.squeeze(-1)
