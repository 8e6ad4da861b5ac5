"""IrregularTransformer: shapes, ragged rows, no leakage between queries, cross-variable flow, the switch."""
import itertools

import pytest
import torch

from tsattn.models import IrregularTransformer
from tsattn.nn import ATTENTIONS, SINKS, MultiHeadAttention, set_attention

V = 5


def observation_batch(b=4, nx=40, ny=25, seed=1, dtype=torch.float32):
    """Random observation sets: times sorted within each series, some padding, one series without history."""
    g = torch.Generator().manual_seed(seed)
    x_var = torch.randint(0, V, (b, nx), generator=g)
    x_time = -torch.sort(torch.rand(b, nx, generator=g, dtype=torch.float64) * 24, dim=1, descending=True).values
    x_value = torch.randn(b, nx, generator=g, dtype=torch.float64)
    x_mask = torch.rand(b, nx, generator=g) < 0.8
    x_mask[0] = False                                   # a series with no history at all
    x_mask[1, x_var[1] == 2] = False                    # a variable never observed in series 1
    y_var = torch.randint(0, V, (b, ny), generator=g)
    y_time = torch.sort(torch.rand(b, ny, generator=g, dtype=torch.float64) * 24, dim=1).values
    y_mask = torch.rand(b, ny, generator=g) < 0.9
    return dict(x_time=x_time.to(dtype), x_var=x_var, x_value=x_value.to(dtype), x_mask=x_mask,
                y_time=y_time.to(dtype), y_var=y_var, y_mask=y_mask)


def build(attention="continuous", sink="learned", rope=True, seed=0, dtype=torch.float64, **kw):
    torch.manual_seed(seed)
    model = IrregularTransformer(V, attention=attention, sink=sink, rope=rope, d_model=16, n_heads=2, d_ff=32, **kw)
    with torch.no_grad():
        for m in model.modules():                        # move learned sinks off zero so that they matter
            if isinstance(m, MultiHeadAttention) and m.sink.kind == "learned":
                m.sink.k0.normal_()
                m.sink.v0.normal_()
    return model.to(dtype).eval()


@pytest.mark.parametrize("attention,sink,rope", list(itertools.product(ATTENTIONS, SINKS, [False, True])))
def test_shapes_finite_and_padding_is_zero(attention, sink, rope):
    model = build(attention, sink, rope, dtype=torch.float32)
    batch = observation_batch()
    out = model(**batch)
    assert out.shape == batch["y_time"].shape
    assert torch.isfinite(out).all()
    assert (out[~batch["y_mask"]] == 0).all()
    model.train()
    out = model(**batch)
    out[batch["y_mask"]].square().mean().backward()
    missing = [n for n, p in model.named_parameters() if p.grad is None]
    allowed = {"first": ("sink",), "zeros": ("sink",)}.get(sink, ())
    assert all(any(a in n for a in allowed) for n in missing), missing


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_buckets_change_nothing(attention):
    """Length buckets are only a speed device: 1 bucket and 4 give the same forecasts (fp64)."""
    model, batch = build(attention), observation_batch(dtype=torch.float64)
    reference = model(**batch)
    for n in (1, 2, 7):
        model.n_buckets = n
        torch.testing.assert_close(model(**batch), reference, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention,residual", list(itertools.product(ATTENTIONS, [False, True])))
def test_a_query_depends_on_its_own_time_and_variable_only(attention, residual):
    """No leakage between queries: changing, adding or removing other queries leaves a query's forecast."""
    model, batch = build(attention, residual=residual), observation_batch(dtype=torch.float64)
    if residual:                                          # a trained head, not the zero it starts at
        torch.nn.init.normal_(model.head.weight)
    out = model(**batch)
    other = dict(batch)
    other["y_time"] = batch["y_time"].clone()
    other["y_var"] = batch["y_var"].clone()
    other["y_mask"] = batch["y_mask"].clone()
    other["y_time"][:, 10:] += 5.0
    other["y_var"][:, 10:] = (other["y_var"][:, 10:] + 1) % V
    other["y_mask"][:, 15:] = ~other["y_mask"][:, 15:]
    changed = model(**other)
    keep = batch["y_mask"][:, :10]
    torch.testing.assert_close(changed[:, :10][keep], out[:, :10][keep], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_information_flows_across_variables_and_time_matters(attention):
    model, batch = build(attention), observation_batch(dtype=torch.float64)
    out = model(**batch)
    # change the history of variable 0 only: forecasts of the other variables move
    other = dict(batch, x_value=batch["x_value"] + 3.0 * (batch["x_var"] == 0))
    moved = model(**other)
    others = batch["y_mask"] & (batch["y_var"] != 0)
    others[0] = False                                     # series 0 has no history
    assert (moved - out)[others].abs().max() > 1e-6
    # the same queries at other times give other forecasts
    later = model(**dict(batch, y_time=batch["y_time"] + 7.0))
    assert (later - out)[batch["y_mask"]].abs().max() > 1e-6


@pytest.mark.parametrize("attention,tokens", list(itertools.product(ATTENTIONS, [None, 5.0])))
def test_residual_starts_at_the_last_observation(attention, tokens):
    """residual=True: untrained, the forecast of an observed variable is its last observed value (the
    LastObservation baseline), of a never observed one 0 (the head's output alone, zero at the start);
    with patch tokens too (the last value comes from the observations, not from the pooled tokens)."""
    from tsattn.models.baselines import LastObservation

    model, batch = build(attention, residual=True, token_length=tokens), observation_batch(dtype=torch.float64)
    out = model(**batch)
    observed = torch.zeros(batch["y_var"].shape, dtype=torch.bool)
    for i in range(batch["y_var"].shape[0]):
        seen = batch["x_var"][i][batch["x_mask"][i]]
        observed[i] = torch.isin(batch["y_var"][i], seen)
    last = LastObservation(V).double()(**batch)
    query = batch["y_mask"]
    assert (query & observed).any() and (query & ~observed).any()
    # exact by construction: a zero output layer gives exactly 0, and 0 + the last value is that value
    torch.testing.assert_close(out[query & observed], last[query & observed], rtol=1e-15, atol=0.0)
    assert (out[query & ~observed] == 0).all()
    # the plain model does not start there
    plain = build(attention)(**batch)
    assert (plain - last)[query & observed].abs().max() > 1e-3
    with pytest.raises(TypeError, match="residual"):
        IrregularTransformer(V, residual="yes")


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_residual_start_mean_starts_every_query_at_the_last_observation_baseline(attention):
    """residual_start="mean": untrained, a never observed variable starts at its mean (``fit_statistics``), so the
    whole forecast is exactly LastObservation's with the same means; observed variables as before."""
    from tsattn.models.baselines import LastObservation

    batch = observation_batch(dtype=torch.float64)
    model = build(attention, residual=True, residual_start="mean")
    batches = [dict(b, y_value=torch.randn(b["y_time"].shape, generator=torch.Generator().manual_seed(i), dtype=torch.float64))
               for i, b in enumerate((batch, observation_batch(seed=2, dtype=torch.float64)))]   # + target values
    model.fit_statistics(batches)
    last = LastObservation(V).double()
    last.fit_statistics(batches)
    torch.testing.assert_close(model.start_value, last.mean, rtol=0.0, atol=0.0)
    assert model.start_value.abs().min() > 0
    query = batch["y_mask"]
    out, want = model(**batch), last(**batch)
    torch.testing.assert_close(out[query], want[query], rtol=1e-15, atol=0.0)
    zero = build(attention, residual=True)(**batch)       # "zero" (the default) differs only where never observed
    differs = (out - zero).abs() > 0
    assert differs.any() and torch.equal(out[~differs], zero[~differs])
    assert "start_value" in model.state_dict() and "start_value" not in build(attention, residual=True).state_dict()
    with pytest.raises(ValueError, match="set residual=True too"):
        IrregularTransformer(V, residual_start="mean")
    with pytest.raises(ValueError, match="residual_start"):
        IrregularTransformer(V, residual=True, residual_start="median")


def test_variable_scales_are_medians_and_median_absolute_deviations():
    """``variable_scales``: per variable, the median of its history values, their median absolute deviation
    (the mean absolute deviation where that is 0, 1 for a constant or unseen variable), and the same spread of
    its changes since the history's last value (its value spread where no target follows a seen value)."""
    from tsattn.models.value_scales import variable_scales

    def batch(x, y):                                     # x, y: lists of (time, variable, value) for one series
        cols = lambda rows, i, dt: torch.tensor([[r[i] for r in rows]], dtype=dt)
        return dict(x_time=cols(x, 0, torch.float64), x_var=cols(x, 1, torch.long), x_value=cols(x, 2, torch.float64),
                    x_mask=torch.ones(1, len(x), dtype=torch.bool), y_time=cols(y, 0, torch.float64),
                    y_var=cols(y, 1, torch.long), y_value=cols(y, 2, torch.float64),
                    y_mask=torch.ones(1, len(y), dtype=torch.bool))

    # variable 0: values 1, 2, 4, 10 over two series (torch's lower median 2, |dev| 1, 0, 2, 8 -> MAD 1); changes: series 1's
    # last value is 2 (time -1, not 1 at -3), its targets 5 and 1 -> changes 3, -1; series 2's last 10, target 10
    # -> 0: median |change| of (3, 1, 0) is 1. Variable 1: constant 7 -> spread 1; its one target 7 too: constant
    # over the samples -> step 0 (it does not move). Variable 2: targets only -> center 0, spread 1, step 1.
    # Variable 3: 0, 0, 0, 6 -> MAD 0 -> mean absolute deviation 1.5; no target -> step = spread.
    batches = [batch([(-3, 0, 1.0), (-1, 0, 2.0), (-2, 1, 7.0), (-1, 3, 0.0), (-0.5, 3, 0.0)],
                     [(1, 0, 5.0), (2, 0, 1.0), (1, 1, 7.0), (1, 2, 3.0)]),
               batch([(-5, 0, 4.0), (-1, 0, 10.0), (-1, 3, 0.0), (-2, 3, 6.0)], [(3, 0, 10.0)])]
    center, spread, step = variable_scales(batches, 4)
    torch.testing.assert_close(center, torch.tensor([2.0, 7.0, 0.0, 0.0], dtype=torch.float64))
    torch.testing.assert_close(spread, torch.tensor([1.0, 1.0, 1.0, 1.5], dtype=torch.float64))
    torch.testing.assert_close(step, torch.tensor([1.0, 0.0, 1.0, 1.5], dtype=torch.float64))
    # a target that differs (8 after the history's 7s): not constant -> the changes' spread (mean |1| = 1)
    batches[0]["y_value"][0, 2] = 8.0
    torch.testing.assert_close(variable_scales(batches, 4)[2], torch.tensor([1.0, 1.0, 1.0, 1.5], dtype=torch.float64))


@pytest.mark.parametrize("data_step", [False, True])
def test_a_constant_variable_does_not_move(data_step):
    """``ValueScales.forecast``: a variable with ``step`` 0 (constant over the train samples) keeps its last value
    (residual: a move of 0) or its center, whatever the head outputs; the others move by their steps."""
    from tsattn.models.value_scales import ValueScales

    scales = ValueScales(2, torch.nn.Linear(3, 1) if data_step else None)
    scales.center.copy_(torch.tensor([5.0, 7.0]))
    scales.spread.copy_(torch.tensor([2.0, 1.0]))
    scales.step.copy_(torch.tensor([0.5, 0.0]))
    if data_step:
        torch.nn.init.ones_(scales.data_head.weight)
    out, features = torch.tensor([[1.0], [1.0], [1.0], [1.0]]), torch.ones(4, 3)
    var, seen = torch.tensor([0, 0, 1, 1]), torch.tensor([True, False, True, False])
    extra = 3.0 if data_step else 0.0
    residual = scales.forecast(out, features, seen, var, residual=True)[:, 0]
    torch.testing.assert_close(residual, torch.tensor([0.5 + extra, 2.0 + extra, 0.0, 0.0]))
    plain = scales.forecast(out, features, seen, var, residual=False)[:, 0]
    torch.testing.assert_close(plain, torch.tensor([7.0 + extra, 7.0 + extra, 7.0, 7.0]))


@pytest.mark.parametrize("attention,residual", list(itertools.product(ATTENTIONS, [True, False])))
def test_value_norm_variable_forecasts_each_variable_on_its_own_scale(attention, residual):
    """``value_norm="variable"``: scale and shift each variable's values (and fit the statistics again) and the
    forecasts of the same weights scale and shift with them (every query: a variable the history never showed
    starts at its center), which the data-scale model does not do; untrained with ``residual``, the forecast is
    the last observation, and the center where there is none; the buffers are saved, and absent without it."""
    from tsattn.models.baselines import LastObservation

    a = torch.tensor([1.0, 1e-3, 50.0, 2.0, 0.2], dtype=torch.float64)           # per variable
    b = torch.tensor([0.0, 3.0, -2.0, 0.5, 1.0], dtype=torch.float64)
    g = torch.Generator().manual_seed(5)

    def with_targets(batch, transform=False):
        y_value = torch.randn(batch["y_time"].shape, generator=torch.Generator().manual_seed(9), dtype=torch.float64)
        batch = dict(batch, y_value=y_value)
        if transform:
            for part in ("x", "y"):
                batch[f"{part}_value"] = a[batch[f"{part}_var"]] * batch[f"{part}_value"] + b[batch[f"{part}_var"]]
        return batch

    plain_batch = observation_batch(dtype=torch.float64)
    for model_kw in (dict(value_norm="variable"), {}):
        model = build(attention, residual=residual, **model_kw)
        if residual:                                        # untrained: the last observation, as without the option
            model.fit_statistics([with_targets(plain_batch)])
            last = LastObservation(V).double()(**plain_batch)
            observed = torch.stack([torch.isin(plain_batch["y_var"][i], plain_batch["x_var"][i][plain_batch["x_mask"][i]])
                                    for i in range(plain_batch["y_var"].shape[0])])
            out = model(**plain_batch)
            torch.testing.assert_close(out[observed & plain_batch["y_mask"]],
                                       last[observed & plain_batch["y_mask"]], rtol=1e-15, atol=0.0)
            unseen = ~observed & plain_batch["y_mask"]
            assert unseen.any()
            want = model.value_scales.center[plain_batch["y_var"]][unseen] if model_kw else torch.zeros(int(unseen.sum()))
            torch.testing.assert_close(out[unseen], want.double(), rtol=1e-15, atol=0.0)
        with torch.no_grad():
            for p in model.head.parameters():
                p.normal_(generator=g)
        outs = []
        for transform in (False, True):
            batch = with_targets(observation_batch(dtype=torch.float64), transform)
            model.fit_statistics([batch])
            outs.append(model(**{k: v for k, v in batch.items() if k != "y_value"}))
        query = plain_batch["y_mask"]
        y_var = plain_batch["y_var"]
        moved = a[y_var] * outs[0] + b[y_var]
        if model_kw:
            torch.testing.assert_close(outs[1][query], moved[query], rtol=1e-9, atol=1e-9)
            assert {"value_scales.center", "value_scales.spread", "value_scales.step"} <= set(model.state_dict())
        else:
            assert (outs[1] - moved)[query].abs().max() > 1e-2
            assert "value_scales.center" not in model.state_dict()
    with pytest.raises(ValueError, match="value_norm"):
        IrregularTransformer(V, value_norm="robust")


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_data_step_adds_a_move_on_the_data_scale(attention):
    """``data_step=True``: untrained, the forecast is that of ``value_norm="variable"`` (the second output starts
    at zero); with both outputs set, it is the per-variable step's forecast plus the data-scale output, which
    does not scale with a variable's values (so the per-variable invariance no longer holds)."""
    batch = observation_batch(dtype=torch.float64)
    targets = dict(batch, y_value=torch.randn(batch["y_time"].shape, generator=torch.Generator().manual_seed(4),
                                              dtype=torch.float64))
    steps, both = (build(attention, residual=True, value_norm="variable", data_step=flag) for flag in (False, True))
    for model in (steps, both):
        model.fit_statistics([targets])
    query = batch["y_mask"]
    torch.testing.assert_close(both(**batch)[query], steps(**batch)[query], rtol=1e-15, atol=0.0)
    g = torch.Generator().manual_seed(6)
    with torch.no_grad():
        for p in itertools.chain(both.head.parameters(), both.value_scales.data_head.parameters()):
            p.normal_(generator=g)
        steps.load_state_dict({k: v for k, v in both.state_dict().items() if not k.startswith("value_scales.data_head")})
    with_data = both(**batch)
    with torch.no_grad():
        for p in both.value_scales.data_head.parameters():
            p.zero_()
    torch.testing.assert_close(both(**batch)[query], steps(**batch)[query], rtol=1e-15, atol=0.0)
    assert (with_data - steps(**batch))[query].abs().min() > 0
    with pytest.raises(ValueError, match="data_step"):
        IrregularTransformer(V, data_step=True)
    assert "value_scales.data_head.weight" in both.state_dict()
    assert "value_scales.data_head.weight" not in steps.state_dict()


def test_drop_history_drops_observations_or_whole_variables_at_their_rates():
    from tsattn.models.irregular import drop_history

    g = torch.Generator().manual_seed(3)
    x_var = torch.randint(0, V, (400, 60), generator=g)
    x_mask = torch.rand(400, 60, generator=g) < 0.7
    assert torch.equal(drop_history(x_var, x_mask, 0.0, 0.0, V), x_mask)
    torch.manual_seed(0)
    kept = drop_history(x_var, x_mask, 0.25, 0.0, V)
    assert not (kept & ~x_mask).any()                        # padding is never revived
    assert abs(1 - kept.sum().item() / x_mask.sum().item() - 0.25) < 0.02
    torch.manual_seed(0)
    kept = drop_history(x_var, x_mask, 0.0, 0.3, V)
    assert not (kept & ~x_mask).any()
    dropped_sets = kept_sets = 0
    for b in range(x_var.shape[0]):                          # a (series, variable) is kept or dropped whole
        for v in range(V):
            real = x_mask[b] & (x_var[b] == v)
            if real.any():
                n_kept = int(kept[b][real].sum())
                assert n_kept in (0, int(real.sum()))
                dropped_sets += n_kept == 0
                kept_sets += n_kept > 0
    assert abs(dropped_sets / (dropped_sets + kept_sets) - 0.3) < 0.04


@pytest.mark.parametrize("kw", [dict(history_dropout=0.4), dict(history_variable_dropout=0.4)])
def test_history_dropout_acts_in_training_only_and_is_the_dropped_mask(kw):
    """The option adds no weights (the same draws as without it), changes nothing in eval mode, and in
    training the forecast is the model's on the mask ``drop_history`` drew from the same RNG state."""
    from tsattn.models.irregular import drop_history

    batch = observation_batch(dtype=torch.float64)
    plain, model = build(residual=True), build(residual=True, **kw)
    weights = [dict(m.named_parameters()) for m in (model, plain)]
    torch.testing.assert_close(*weights, rtol=0.0, atol=0.0)
    torch.testing.assert_close(model(**batch), plain(**batch), rtol=0.0, atol=0.0)
    model.train(), plain.train()
    torch.manual_seed(5)
    out = model(**batch)
    torch.manual_seed(5)
    mask = drop_history(batch["x_var"], batch["x_mask"], kw.get("history_dropout", 0.0),
                        kw.get("history_variable_dropout", 0.0), V)
    assert (mask != batch["x_mask"]).any()
    torch.testing.assert_close(out, plain(**dict(batch, x_mask=mask)), rtol=0.0, atol=0.0)
    assert (out - plain(**batch))[batch["y_mask"]].abs().max() > 1e-6


@pytest.mark.parametrize("name,value", [("history_dropout", 1.0), ("history_dropout", -0.1),
                                        ("history_variable_dropout", True), ("history_variable_dropout", "0.1")])
def test_history_dropout_rejects_what_is_not_a_probability(name, value):
    with pytest.raises(ValueError, match=f"`{name}` must be a probability"):
        IrregularTransformer(V, **{name: value})


def test_attentions_differ_and_switch_only_the_temporal_layers():
    model, batch = build("continuous"), observation_batch(dtype=torch.float64)
    continuous = model(**batch)
    n = set_attention(model, "softmax")
    assert n == len(model.temporal) + len(model.decoder)
    softmax = model(**batch)
    assert (continuous - softmax)[batch["y_mask"]].abs().max() > 1e-6
    twin = build("softmax")
    torch.testing.assert_close(twin(**batch), softmax, rtol=1e-12, atol=1e-12)


def test_regular_grid_of_one_variable_is_read_in_time_order():
    """Observations of a variable given out of order across variables still form time-ordered knots:
    interleaving two variables' observations in another (time-sorted) order changes nothing."""
    model = build("continuous")
    t = -torch.arange(12, 0, -1, dtype=torch.float64)[None]           # -12 .. -1
    var = torch.tensor([[0, 1] * 6])
    value = torch.sin(t)
    mask = torch.ones_like(var, dtype=torch.bool)
    y = dict(y_time=torch.tensor([[1.0, 2.0, 1.5]], dtype=torch.float64), y_var=torch.tensor([[0, 1, 0]]))
    out = model(x_time=t, x_var=var, x_value=value, x_mask=mask, **y)
    perm = torch.tensor([1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10])           # swap each (var 0, var 1) pair
    swapped = model(x_time=t[:, perm], x_var=var[:, perm], x_value=value[:, perm], x_mask=mask, **y)
    torch.testing.assert_close(swapped, out, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_learns_a_simple_irregular_problem(attention):
    """Each variable is a sine of its own frequency seen at random times; the model must forecast it."""
    g = torch.Generator().manual_seed(0)
    b, nx, ny = 16, 48, 16
    freq = torch.linspace(0.2, 0.6, V)
    phase = 6.28 * torch.rand(b, 1, generator=g)

    def sample(n, lo, hi):
        var = torch.randint(0, V, (b, n), generator=g)
        t = torch.sort(lo + (hi - lo) * torch.rand(b, n, generator=g), dim=1).values
        return t, var, torch.sin(freq[var] * t + phase)

    xt, xv, xx = sample(nx, -24.0, 0.0)
    yt, yv, yy = sample(ny, 0.0, 6.0)
    torch.manual_seed(0)
    model = IrregularTransformer(V, attention=attention, d_model=32, n_heads=2, d_ff=64, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    ones_x, ones_y = torch.ones_like(xv, dtype=torch.bool), torch.ones_like(yv, dtype=torch.bool)
    first = None
    for _ in range(150):
        loss = (model(xt, xv, xx, ones_x, yt, yv, ones_y) - yy).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        first = loss.item() if first is None else first
    assert loss.item() < 0.1 * first


def test_row_positions_count_distinct_times():
    from tsattn.models.irregular_parts import row_positions

    time = torch.tensor([[-5.0, -5.0, -2.5, -1.0, 0.0], [-9.0, -3.0, -3.0, 0.0, 0.0]])
    mask = torch.tensor([[True, True, True, True, False], [True, True, True, False, False]])
    torch.testing.assert_close(row_positions(time, mask, past=True),
                               torch.tensor([[-3.0, -3.0, -2.0, -1.0, 0.0], [-2.0, -1.0, -1.0, 0.0, 0.0]]))
    y = torch.tensor([[0.5, 0.5, 7.0], [2.0, 3.0, 0.0]])
    ymask = torch.tensor([[True, True, True], [True, True, False]])
    torch.testing.assert_close(row_positions(y, ymask, past=False), torch.tensor([[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]))


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_row_positions_hide_gaps(attention):
    """With positions="rows", stretching the time between observations changes nothing; with real times it does."""
    batch = observation_batch(dtype=torch.float64)
    stretched = dict(batch, x_time=batch["x_time"] * 3.0, y_time=batch["y_time"] * 3.0)
    rows = build(attention, positions="rows")
    torch.testing.assert_close(rows(**stretched), rows(**batch), rtol=1e-10, atol=1e-10)
    real = build(attention)
    assert (real(**stretched) - real(**batch))[batch["y_mask"]].abs().max() > 1e-6


# -- the series sequence (series_layers): one token per distinct history time of a series --------------------

def test_distinct_times_map_every_element_to_its_series_time():
    from tsattn.models.irregular_parts import distinct_times

    series = torch.tensor([0, 0, 0, 2, 2, 0])
    time = torch.tensor([-5.0, -1.0, -5.0, -3.0, -0.5, -2.0])
    slot, counts, times, width = distinct_times(series, time, 3)
    assert width == 3 and counts.tolist() == [3, 0, 2]
    torch.testing.assert_close(times[series, slot], time, rtol=0, atol=0)        # each element at its time
    torch.testing.assert_close(times[0], torch.tensor([-5.0, -2.0, -1.0]))
    torch.testing.assert_close(times[2, :2], torch.tensor([-3.0, -0.5]))
    assert (times.diff(dim=1) > 0).all()                                          # padding keeps rows increasing
    empty = distinct_times(series[:0], time[:0], 2)
    assert empty[1].tolist() == [0, 0] and empty[3] == 1


def test_distinct_ranks_agree_with_unique_rows():
    """The two-sort ranking of (series, time) pairs is torch.unique(dim=0) on the pairs, ties and empty input too."""
    from tsattn.models.irregular_parts import _distinct_ranks

    g = torch.Generator().manual_seed(3)
    for n in (0, 1, 7, 60):
        series = torch.randint(0, 4, (n,), generator=g)
        time = -torch.randint(1, 6, (n,), generator=g).double() / 2                 # many ties
        slot, counts, times, owner, rank = _distinct_ranks(series, time, 5)
        unique, inverse = torch.unique(torch.stack([series.double(), time], 1), dim=0, return_inverse=True)
        assert torch.equal(times, unique[:, 1]) and torch.equal(owner, unique[:, 0].long())
        assert torch.equal(counts, torch.bincount(owner, minlength=5))
        assert torch.equal(rank, torch.cat([torch.arange(int(c)) for c in counts]).long())
        assert torch.equal(slot, rank[inverse])


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_series_cross_on_real_queries_is_the_block_on_the_padded_layout(attention):
    """``read_series_sequence`` runs norms, projections and the feed-forward network on the real queries only:
    the same as the cross-attention block on the padded [B, Ny] layout, read at the real queries."""
    from tsattn.models.irregular_parts import read_series_sequence

    model, batch = build(attention, series_layers=1), observation_batch(dtype=torch.float64)
    block = model.series_cross[0]
    B, Ny = batch["y_time"].shape
    g = torch.Generator().manual_seed(4)
    memory = torch.randn(B, 6, 16, generator=g, dtype=torch.float64)
    times = torch.cumsum(torch.rand(B, 6, generator=g, dtype=torch.float64) + 0.1, 1) - 8.0
    counts = torch.tensor([0, 6, 3, 1])
    q_order = torch.nonzero(batch["y_mask"].reshape(-1)).squeeze(1)
    x = torch.randn(q_order.numel(), 16, generator=g, dtype=torch.float64)
    padded = torch.zeros(B * Ny, 16, dtype=torch.float64).index_copy(0, q_order, x).view(B, Ny, 16)
    expected = block(padded, batch["y_time"], memory=memory, memory_positions=times, key_lengths=counts)
    got = read_series_sequence(block, x, q_order, batch["y_time"], memory, times, counts)
    torch.testing.assert_close(got, expected.reshape(B * Ny, 16)[q_order], rtol=1e-12, atol=1e-12)


def weights(**kw):
    """The named parameters of a small model drawn from seed 0."""
    torch.manual_seed(0)
    return dict(IrregularTransformer(V, d_model=16, n_heads=2, d_ff=32, **kw).named_parameters())


def test_series_layers_none_is_the_model_as_before():
    """The option's modules are drawn after the others: None and the default draw the same weights, and a
    model with the series sequence keeps them (its extra weights come on top)."""
    plain, none, series = weights(), weights(series_layers=None), weights(series_layers=1)
    assert plain.keys() == none.keys() and all(torch.equal(plain[k], v) for k, v in none.items())
    assert all(torch.equal(series[k], v) for k, v in plain.items())
    assert any(k.startswith("series_") for k in series)
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="series_layers"):
            IrregularTransformer(V, series_layers=bad)


OPTIONS = {"series_layers=0": dict(series_layers=0), "series_layers=2": dict(series_layers=2),
           "patch_length=6": dict(patch_length=6.0), "token_length=5": dict(token_length=5.0),
           "token_length=5,patch_length=6,series_layers=1": dict(token_length=5.0, patch_length=6.0, series_layers=1)}


@pytest.mark.parametrize("attention,option", list(itertools.product(ATTENTIONS, OPTIONS)))
def test_optional_paths_are_read_with_buckets_no_leakage_gradients_and_the_switch(attention, option):
    """The series sequence and the time-local variable block: read, bucket-free, no query reads another,
    finite without any history, every weight trained; only temporal attentions switch (the variable
    blocks attend over sets and stay softmax)."""
    model, batch = build(attention, **OPTIONS[option]), observation_batch(dtype=torch.float64)
    out = model(**batch)
    assert torch.isfinite(out).all() and (out[~batch["y_mask"]] == 0).all()
    assert (out - build(attention)(**batch))[batch["y_mask"]].abs().max() > 1e-6   # the new path is read
    for n in (1, 3):
        model.n_buckets = n
        torch.testing.assert_close(model(**batch), out, rtol=1e-12, atol=1e-12)
    other = dict(batch, y_time=batch["y_time"].clone(), y_var=batch["y_var"].clone())
    other["y_time"][:, 10:] += 5.0
    other["y_var"][:, 10:] = (other["y_var"][:, 10:] + 1) % V
    keep = batch["y_mask"][:, :10]
    torch.testing.assert_close(model(**other)[:, :10][keep], out[:, :10][keep], rtol=1e-12, atol=1e-12)
    empty = dict(batch, x_mask=torch.zeros_like(batch["x_mask"]))                # no history at all
    assert torch.isfinite(model(**empty)).all()
    model.train()
    model(**batch)[batch["y_mask"]].square().mean().backward()
    assert all(p.grad is not None for p in model.parameters())
    n = set_attention(model, "softmax" if attention == "continuous" else "continuous")
    series = 0 if model.series_cross is None else len(model.series_blocks) + len(model.series_cross)
    assert n == len(model.temporal) + len(model.decoder) + series


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_series_sequence_reads_when_other_variables_were_observed(attention):
    """Through the series sequence a query of variable 0 sees *when* variable 1 was observed, in its time
    order among all observations; moving variable 1's observations in time moves variable 0's forecasts."""
    batch = observation_batch(dtype=torch.float64)
    shifted = dict(batch, x_time=torch.where(batch["x_var"] == 1, batch["x_time"] - 0.25, batch["x_time"]))
    queries = batch["y_mask"] & (batch["y_var"] == 0)
    queries[0] = False
    model = build(attention, series_layers=1)
    assert (model(**shifted) - model(**batch))[queries].abs().max() > 1e-6
    # with the series blocks' outputs zeroed the model is the base model again, weight for weight
    for block in model.series_cross:
        torch.nn.init.zeros_(block.attn.out_proj.weight)
        torch.nn.init.zeros_(block.attn.out_proj.bias)
        torch.nn.init.zeros_(block.ff.net[-1].weight)
        torch.nn.init.zeros_(block.ff.net[-1].bias)
    base = build(attention)
    base.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith(("series_", "norm_series"))})
    torch.testing.assert_close(model(**batch)[batch["y_mask"]], base(**batch)[batch["y_mask"]], rtol=1e-10,
                               atol=1e-10)


# -- the time-local variable block (patch_length): variables observed in the same history patch ------------

def test_patch_length_none_is_the_model_as_before():
    plain, none, patched = weights(), weights(patch_length=None), weights(patch_length=8)
    assert plain.keys() == none.keys() and all(torch.equal(plain[k], v) for k, v in none.items())
    assert all(torch.equal(patched[k], v) for k, v in plain.items())
    assert any(k.startswith("patch_") for k in patched)
    for bad in (0, -1.0, float("inf"), float("nan"), True, "8"):
        with pytest.raises(ValueError, match="patch_length"):
            IrregularTransformer(V, patch_length=bad)


def test_patch_cells_follow_the_patch_borders():
    """Patch p holds [-(p+1) L, -p L); a time at or after the origin goes to patch 0; one cell per observed
    (series, patch, variable), one set per observed (series, patch)."""
    from tsattn.models.irregular_parts import patch_cells

    series = torch.tensor([0, 0, 0, 0, 1, 1, 1])
    var = torch.tensor([2, 2, 3, 2, 2, 2, 0])
    time = torch.tensor([-4.0, -4.5, -3.9, -20.0, -0.1, 0.0, -8.0]) * 0.5      # scaled, as in forward
    cell, pair, cell_var, mid, number, empty = patch_cells(series, var, time, V, 4.0 * 0.5)
    n_sets = empty.shape[0]
    patch_of = [0, 1, 0, 4, 0, 0, 1]
    for e in range(7):
        for f in range(7):
            same = (series[e], patch_of[e], var[e]) == (series[f], patch_of[f], var[f])
            assert (cell[e] == cell[f]) == same
        assert cell_var[cell[e]] == var[e]
        assert mid[pair[cell[e]]] == pytest.approx(-(patch_of[e] + 0.5) * 4.0 * 0.5)
    assert n_sets == 5                                   # (0, 0), (0, 1), (0, 4), (1, 0), (1, 1)
    assert number.tolist() == [float((cell == c).sum()) for c in range(number.numel())]
    assert int((~empty).sum()) == number.numel() and all(not empty[pair[c], cell_var[c]] for c in range(number.numel()))


def test_patch_block_reads_which_variables_moved_together():
    """Softmax without RoPE: a variable with one knot looks the same to the model as before wherever that
    knot lies in time, so moving it changes no other variable's forecast. With patches, moving it into
    another patch moves it to another set of variables, and the other variables' forecasts move."""
    batch = observation_batch(dtype=torch.float64)
    s = 2
    mask = batch["x_mask"].clone()
    ones = torch.nonzero(mask[s] & (batch["x_var"][s] == 1)).squeeze(1)
    mask[s, ones[1:]] = False                              # variable 1 has exactly one knot in series s
    x_time = batch["x_time"].clone()
    x_time[s, ones[0]] = -1.0
    near = dict(batch, x_mask=mask, x_time=x_time)
    far = dict(near, x_time=x_time.clone())
    far["x_time"][s, ones[0]] = -23.0
    queries = torch.zeros_like(batch["y_mask"])
    queries[s] = batch["y_mask"][s] & (batch["y_var"][s] == 0)
    assert queries.any()
    base = build("softmax", rope=False)
    torch.testing.assert_close(base(**far)[queries], base(**near)[queries], rtol=1e-12, atol=1e-12)
    model = build("softmax", rope=False, patch_length=6.0)
    assert (model(**far) - model(**near))[queries].abs().max() > 1e-6
    # with the block's outputs zeroed the model is the base model again, weight for weight
    for out in model.patch_out:
        torch.nn.init.zeros_(out.weight)
        torch.nn.init.zeros_(out.bias)
    base.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("patch_")})
    torch.testing.assert_close(model(**near)[near["y_mask"]], base(**near)[near["y_mask"]], rtol=1e-10,
                               atol=1e-10)


# -- patch tokens (token_length): one token per observed variable and history patch ------------------------

def test_token_length_none_is_the_model_as_before():
    plain, none, pooled = weights(), weights(token_length=None), weights(token_length=8)
    assert plain.keys() == none.keys() and all(torch.equal(plain[k], v) for k, v in none.items())
    assert all(torch.equal(pooled[k], v) for k, v in plain.items())
    assert any(k.startswith("token_") for k in pooled)
    for bad in (0, -1.0, float("inf"), float("nan"), True, "8"):
        with pytest.raises(ValueError, match="token_length"):
            IrregularTransformer(V, token_length=bad)


def test_pooled_tokens_are_the_patch_means_in_time_order():
    """Brute force: per (series, variable, patch) the mean of the knots plus their offset features, plus the
    count term, at the mean time; tokens of a row in time order, counted per row."""
    from tsattn.models.irregular_parts import pool_tokens

    torch.manual_seed(0)
    model = IrregularTransformer(V, d_model=8, n_heads=2, d_ff=16, token_length=4.0, time_scale=0.5).double()
    key = torch.tensor([0, 0, 0, 0, 3, 3, 7, 7, 7])
    time = torch.tensor([-20.0, -4.5, -4.0, -3.9, -8.0, -0.1, -9.0, -8.5, 0.0], dtype=torch.float64) * 0.5
    knots = torch.randn(9, 8, dtype=torch.float64)
    tokens, c_key, rank, counts, mid = pool_tokens(knots, key, time, 10, 4.0 * 0.5, model.token_offset,
                                                    model.token_count)
    patch_of = [4, 1, 0, 0, 1, 0, 2, 2, 0]                  # [-(p+1) L, -p L), L = 4 h = 2 scaled
    cells = sorted({(int(key[e]), -patch_of[e]) for e in range(9)})
    assert c_key.tolist() == [k for k, _ in cells]
    assert counts.tolist() == [sum(k == r for k, _ in cells) for r in range(10)]
    for c, (k, minus_p) in enumerate(cells):
        members = [e for e in range(9) if (int(key[e]), -patch_of[e]) == (k, minus_p)]
        assert rank[c] == sum(kk == k for kk, pp in cells[:c])
        t = time[members].mean()
        assert mid[c].item() == pytest.approx(t.item(), abs=1e-12)
        expected = ((knots[members] + model.token_offset(time[members] - t)).mean(0)
                    + model.token_count(torch.tensor([float(len(members))], dtype=torch.float64).log()))
        torch.testing.assert_close(tokens[c], expected, rtol=1e-12, atol=1e-12)
    assert all(mid[c] < mid[c + 1] for c in range(len(cells) - 1) if c_key[c] == c_key[c + 1])


@pytest.mark.parametrize("attention", ATTENTIONS)
def test_one_observation_per_patch_is_the_knot_model(attention):
    """Patches shorter than any gap hold one observation each; with the pooling's own terms zeroed the tokens
    are the knots at their own times, and the model is the knot model weight for weight."""
    batch = observation_batch(dtype=torch.float64)
    model = build(attention, token_length=1e-4)
    for m in (model.token_offset.out, model.token_count):
        torch.nn.init.zeros_(m.weight)
        torch.nn.init.zeros_(m.bias)
    base = build(attention)
    base.load_state_dict({k: v for k, v in model.state_dict().items() if not k.startswith("token_")})
    query = batch["y_mask"]
    torch.testing.assert_close(model(**batch)[query], base(**batch)[query], rtol=1e-10, atol=1e-10)
    # a longer patch pools: other forecasts
    coarse = build(attention, token_length=8.0)
    coarse.load_state_dict(model.state_dict())
    assert (coarse(**batch) - base(**batch))[query].abs().max() > 1e-6


def test_a_patch_token_reads_the_set_of_its_observations():
    """A token is a function of the set of observations in its patch, not of the order they are listed in:
    listing a variable's observations in reverse leaves the other variables' forecasts as they were (its own
    queries read the last listed value). The knot model reads them as a sequence, and moves."""
    batch = observation_batch(dtype=torch.float64)
    s = 2
    idx = torch.nonzero(batch["x_mask"][s] & (batch["x_var"][s] == 1)).squeeze(1)
    assert idx.numel() >= 2
    swapped = dict(batch, x_time=batch["x_time"].clone(), x_value=batch["x_value"].clone())
    swapped["x_time"][s, idx] = batch["x_time"][s, idx].flip(0)
    swapped["x_value"][s, idx] = batch["x_value"][s, idx].flip(0)
    query = torch.zeros_like(batch["y_mask"])
    query[s] = batch["y_mask"][s] & (batch["y_var"][s] != 1)
    assert query.any()
    model = build("continuous", token_length=30.0)        # one patch holds the whole 24 h history
    torch.testing.assert_close(model(**swapped)[query], model(**batch)[query], rtol=1e-10, atol=1e-10)
    knots = build("continuous")
    assert (knots(**swapped) - knots(**batch))[query].abs().max() > 1e-6


def _opt_in_embedding(option, module, batch):
    """An opt-in embedding ``option=True`` that creates ``module`` (a Linear) last: the other weights are drawn as
    without it, a plain model's state dict loads with only its keys missing, and with it at zero the forecast is
    the plain model's exactly. Returns (plain, model) with the embedding's weight drawn at random again."""
    drawn = []
    for kw in ({}, {option: True}):
        torch.manual_seed(0)
        drawn.append(dict(IrregularTransformer(V, d_model=16, n_heads=2, d_ff=32, **kw).named_parameters()))
    assert set(drawn[1]) - set(drawn[0]) == {f"{module}.weight", f"{module}.bias"}
    torch.testing.assert_close({k: drawn[1][k] for k in drawn[0]}, drawn[0], rtol=0.0, atol=0.0)
    plain, model = build(), build(**{option: True})     # not residual: an output layer that is not zero
    missing = model.load_state_dict(plain.state_dict(), strict=False).missing_keys
    assert sorted(missing) == [f"{module}.bias", f"{module}.weight"]
    layer = getattr(model, module)
    with torch.no_grad():
        layer.weight.zero_()
        layer.bias.zero_()
    torch.testing.assert_close(model(**batch), plain(**batch), rtol=0.0, atol=0.0)
    with torch.no_grad():
        layer.weight.normal_()
    return plain, model


def test_count_features_read_how_often_each_variable_was_observed():
    """The option draws the other weights as without it; with its embedding at zero the forecast is the model's
    without it; otherwise one more observation of a variable (a repeat of the last, 1e-6 earlier) moves that
    series' forecasts otherwise than in the same model without counts, and no other series'."""
    batch = observation_batch(dtype=torch.float64)
    plain, model = _opt_in_embedding("count_features", "count_embedding", batch)
    # series 2: its last real observation repeated 1e-6 earlier (continuous attention: an interval of no length)
    b, n = 2, int(torch.nonzero(batch["x_mask"][2]).max())
    extra = {k: torch.cat([v, v[:, n:n + 1]], dim=1) for k, v in batch.items() if k.startswith("x_")}
    extra["x_time"][b, -1] -= 1e-6
    extra["x_mask"][[0, 1, 3], -1] = False
    repeated = dict(batch, **extra)
    change = model(**repeated) - model(**batch)
    change_without = plain(**repeated) - plain(**batch)       # the same weights, no counts: the knot alone
    real = batch["y_mask"]
    assert (change - change_without)[b][real[b]].abs().max() > 1e-4
    others = [0, 1, 3]
    torch.testing.assert_close(change[others], torch.zeros_like(change[others]), rtol=0.0, atol=1e-12)
    with pytest.raises(TypeError, match="count_features"):
        IrregularTransformer(V, count_features=1)


def test_query_pattern_features():
    """Per query: the variables its series requests at the same time (itself included), then log(1 + n), n the
    queries of its (series, variable); series are kept apart, and no queries give no rows."""
    from tsattn.models.irregular_parts import query_pattern

    series = torch.tensor([0, 0, 0, 1, 1, 0])
    time = torch.tensor([1.0, 1.0, 2.0, 1.0, 3.0, 2.0], dtype=torch.float64)
    var = torch.tensor([0, 2, 2, 1, 1, 3])
    key = series * 4 + var
    counts = torch.bincount(key, minlength=8)
    out = query_pattern(series, time, var, key, counts, 2, 4)
    assert out.shape == (6, 5) and out.dtype == torch.float64
    expected = torch.tensor([[1, 0, 1, 0], [1, 0, 1, 0], [0, 0, 1, 1], [0, 1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 1]],
                            dtype=torch.float64)
    torch.testing.assert_close(out[:, :4], expected, rtol=0.0, atol=0.0)
    torch.testing.assert_close(out[:, 4], torch.log1p(torch.tensor([1.0, 2.0, 2.0, 2.0, 2.0, 1.0],
                                                                     dtype=torch.float64)))
    assert query_pattern(series[:0], time[:0], var[:0], key[:0], counts, 2, 4).shape == (0, 5)


def test_query_pattern_reads_the_other_queries_and_is_off_by_default():
    """The diagnostic draws the other weights as without it; with its embedding at zero the forecast is the
    model's without it; otherwise a query added at the time of another query of the same series moves that
    query's forecast (the model without it: not; test_a_query_depends_on_its_own_time_and_variable_only), and
    no other series' forecast."""
    batch = observation_batch(dtype=torch.float64)
    plain, model = _opt_in_embedding("query_pattern", "pattern_embedding", batch)
    b, q = 2, int(torch.nonzero(batch["y_mask"][2])[0])          # series 2's first real query
    added = {k: torch.cat([v, v[:, q:q + 1]], dim=1) for k, v in batch.items() if k.startswith("y_")}
    added["y_var"][b, -1] = (batch["y_var"][b, q] + 1) % V        # another variable at the same time
    added["y_mask"][[0, 1, 3], -1] = False
    more = dict(batch, **added)
    n = batch["y_time"].shape[1]
    assert (model(**more)[b, q] - model(**batch)[b, q]).abs() > 1e-6
    torch.testing.assert_close(plain(**more)[:, :n], plain(**batch), rtol=1e-12, atol=1e-12)
    others = [0, 1, 3]
    torch.testing.assert_close(model(**more)[others, :n], model(**batch)[others], rtol=1e-12, atol=1e-12)
    with pytest.raises(TypeError, match="query_pattern"):
        IrregularTransformer(V, query_pattern=1)
