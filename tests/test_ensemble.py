"""``ensemble=k``: k nets trained side by side, forecasting as their mean. One net is the model as it was (the same
draw of weights); the forecast is the members' mean on both tasks; a training step gives each member the gradient
it would get alone; a fitted ensemble's validation error is at most its members' mean error, and save / load keeps
it; bad settings say so. ``bootstrap=True``: each member's loss weighs the batch's samples by its own Poisson(1)
draw, where a weight of 0 leaves a sample out and a weight of 2 counts it twice."""
import copy
import warnings

import numpy as np
import pytest
import torch

from tsattn import Forecaster
from tsattn.lightning import ForecastModule
from tsattn.models.ensemble import Ensemble

from .synthetic import LONG, observations, series

QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)
TINY_WINDOW = {"patch_len": 8, "stride": 4, "n_layers": 1, "n_heads": 2, "d_model": 8, "d_ff": 16, "dropout": 0.0}
TINY_IRREGULAR = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "time_features": 4, "dropout": 0.0}


def irregular(**kwargs):
    return ForecastModule("irregular", n_channels=3, lookback=None, horizon=None, attention="continuous",
                          sink="learned", rope=True, model_kwargs=TINY_IRREGULAR, **kwargs)


def window(**kwargs):
    return ForecastModule("patchtst", n_channels=3, lookback=32, horizon=8, model_kwargs=TINY_WINDOW, **kwargs)


def observation_batch():
    return {"x_time": torch.tensor([[-5.0, -3.0, -1.0, 0.0], [-4.0, -2.0, -1.5, -0.5]]),
            "x_var": torch.tensor([[0, 1, 0, 0], [2, 2, 1, 0]]),
            "x_value": torch.tensor([[0.1, 0.7, 0.4, 0.0], [0.3, 0.2, 0.9, 0.5]]),
            "x_mask": torch.tensor([[True, True, True, False], [True, True, True, True]]),
            "y_time": torch.tensor([[1.0, 2.0, 3.0], [0.5, 1.0, 0.0]]), "y_var": torch.tensor([[0, 1, 2], [1, 2, 0]]),
            "y_value": torch.tensor([[0.2, 0.6, 0.1], [0.8, 0.3, 0.0]]),
            "y_mask": torch.tensor([[True, True, True], [True, True, False]])}


def window_batch():
    generator = torch.Generator().manual_seed(3)
    return {"x": torch.randn(4, 32, 3, generator=generator), "t_x": None,
            "y": torch.randn(4, 8, 3, generator=generator)}


@pytest.mark.parametrize("build", [irregular, window])
def test_one_member_is_the_model_as_before_and_k_members_draw_their_own_weights(build):
    torch.manual_seed(0)
    plain = build()
    torch.manual_seed(0)
    one = build(ensemble=1)
    assert not isinstance(one.net, Ensemble)
    assert list(plain.state_dict()) == list(one.state_dict())
    for name, value in plain.named_parameters():
        assert torch.equal(value, one.get_parameter(name))              # the same draw
    torch.manual_seed(0)
    three = build(ensemble=3)
    first, second = (dict(m.named_parameters()) for m in three.net.members[:2])
    for name, value in dict(plain.net.named_parameters()).items():
        assert torch.equal(first[name], value)                           # member 0 is the draw one net gets
    assert any(not torch.equal(first[n], second[n]) for n in first)      # member 1 has its own


@pytest.mark.parametrize("build,batch", [(irregular, observation_batch), (window, window_batch)])
def test_the_forecast_is_the_members_mean(build, batch):
    torch.manual_seed(0)
    module = build(ensemble=3).eval()
    data = batch()
    members = []
    for member in module.net.members:
        single = build().eval()
        single.net.load_state_dict(member.state_dict())
        members.append(single(data))
    torch.testing.assert_close(module(data), torch.stack(members).mean(0))
    assert not torch.allclose(members[0], members[1])                   # the mean of different forecasts


@pytest.mark.parametrize("build,batch", [(irregular, observation_batch), (window, window_batch)])
def test_a_training_step_gives_each_member_the_gradient_it_gets_alone(build, batch):
    torch.manual_seed(0)
    module = build(ensemble=2)
    data = batch()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                  # self.log without a Trainer
        module.training_step(data, 0).backward()
    for member in module.net.members:
        single = build()
        single.net.load_state_dict(member.state_dict())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            single.training_step(data, 0).backward()
        for (name, p), (_, q) in zip(member.named_parameters(), single.net.named_parameters()):
            assert (p.grad is None) == (q.grad is None), name
            if p.grad is not None:
                torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_a_fitted_ensemble_is_no_worse_than_its_members_and_is_saved(tmp_path):
    table = observations()
    f = Forecaster("irregular", lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, seed=1, ensemble=2)
    f.fit(table, max_epochs=2, **LONG, **QUIET)
    assert isinstance(f.module.net, Ensemble) and f.module.hparams.ensemble == 2
    ensemble_mse = f.evaluate("val")["mse"]
    member_mse = []
    for member in f.module.net.members:                 # each member alone, on the same data
        single = copy.copy(f)
        single.module = ForecastModule(**{**f.module.hparams, "ensemble": 1})
        state = {k: v for k, v in f.module.state_dict().items() if not k.startswith("net.")}
        single.module.load_state_dict({**state, **{f"net.{k}": v for k, v in member.state_dict().items()}})
        member_mse.append(single.evaluate("val")["mse"])
    # the squared error is convex: per variable, the mean forecast's error is at most the members' mean error
    assert ensemble_mse <= np.mean(member_mse) + 1e-9 and member_mse[0] != member_mse[1]
    g = Forecaster.load(f.save(tmp_path / "ensemble.ckpt"))
    assert g.config["ensemble"] == 2 and isinstance(g.module.net, Ensemble)
    at = [table["hours"].max() + 1.0]
    np.testing.assert_array_equal(g.predict(table, at=at)["value"].to_numpy(), f.predict(at=at)["value"].to_numpy())


def test_a_window_ensemble_with_intervals():
    f = Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, batch_size=64, seed=1,
                   levels=[80], ensemble=2, calibrate=True)
    f.fit(series(), max_epochs=1, **QUIET)
    out = f.predict(series())
    assert (out["OT-lo-80"] <= out["OT"]).all() and (out["OT"] <= out["OT-hi-80"]).all()
    assert f.evaluate("val")["coverage_80"] >= 0.8


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "2"])
def test_bad_ensemble_sizes_say_so(value):
    with pytest.raises(ValueError, match="ensemble"):
        Forecaster("irregular", ensemble=value)


def test_a_reference_forecast_is_not_an_ensemble():
    with pytest.raises(ValueError, match="reference forecast"):
        Forecaster("naive", ensemble=2)
    with pytest.raises(ValueError, match="at least 2"):
        Ensemble([torch.nn.Linear(1, 1)])


def _fit_irregular(table, seed, **kwargs):
    f = Forecaster("irregular", lookback=24.0, horizon=12.0, model_kwargs=TINY_IRREGULAR, seed=seed, **kwargs)
    return f.fit(table, max_epochs=1, **LONG, **QUIET)


def test_combined_fits_forecast_the_mean_of_their_nets_and_are_saved(tmp_path):
    table = observations()
    one, two = _fit_irregular(table, 1), _fit_irregular(table, 2, ensemble=2)
    one.blend_naive()                                    # a member's blend is not the mean's: not carried over
    assert bool(one.module.naive_blended)
    combined = Forecaster.combine([one, two])
    assert combined.module.hparams.ensemble == 3 and len(combined.module.net.members) == 3
    assert not bool(combined.module.naive_blended)
    for member, net in zip(combined.module.net.members, [one.module.net, *two.module.net.members]):
        for (name, p), (_, q) in zip(member.state_dict().items(), net.state_dict().items()):
            assert torch.equal(p, q) if torch.is_tensor(p) else p == q, name   # each net as trained
    one.module.naive_weight.fill_(1.0)                   # unblended again, to compare the forecasts
    at = [table["hours"].max() + 1.0]
    p1, p2 = (f.predict(at=at)["value"].to_numpy() for f in (one, two))
    mean = combined.predict(at=at)["value"].to_numpy()
    np.testing.assert_allclose(mean, (p1 + 2 * p2) / 3, rtol=1e-5, atol=1e-6)   # the mean over its three nets
    g = Forecaster.load(combined.save(tmp_path / "combined.ckpt"))
    assert g.config["ensemble"] == 3
    np.testing.assert_array_equal(g.predict(table, at=at)["value"].to_numpy(), mean)


def test_combined_window_fits():
    fits = [Forecaster("patchtst", lookback=48, horizon=12, model_kwargs=TINY_WINDOW, batch_size=64, seed=s)
            .fit(series(), max_epochs=1, **QUIET) for s in (1, 2)]
    combined = Forecaster.combine(fits)
    outs = [f.predict(series())["OT"].to_numpy() for f in (*fits, combined)]
    np.testing.assert_allclose(outs[2], (outs[0] + outs[1]) / 2, rtol=1e-5, atol=1e-6)


def test_combining_what_cannot_be_combined_says_so():
    table = observations()
    one = _fit_irregular(table, 1)
    with pytest.raises(ValueError, match="lr: 0.001 against 0.01"):
        Forecaster.combine([one, _fit_irregular(table, 2, lr=1e-2)])
    other = observations(seed=1)                         # the same layout, other values
    with pytest.raises(ValueError, match="other data"):
        Forecaster.combine([one, _fit_irregular(other, 2)])
    with pytest.raises(RuntimeError, match="no model yet"):
        Forecaster.combine([one, Forecaster("irregular")])
    with pytest.raises(ValueError, match="at least 2"):
        Forecaster.combine([one])
    with pytest.raises(TypeError, match="fitted Forecasters"):
        Forecaster.combine([one, one.module])


def _subset(batch, rows):
    return {k: (None if v is None else v[rows]) for k, v in batch.items()}


def _loss(module, batch, weight=None, net=None):
    return module.task.training_loss(module, batch, net, weight=weight)


@pytest.mark.parametrize("reduction", ["variable", "point", "dataset"])
def test_a_series_weight_counts_it_that_many_times(reduction):
    torch.manual_seed(0)
    module = irregular(loss_reduction=reduction)
    if reduction == "dataset":
        module.target_weight.copy_(torch.tensor([0.5, 2.0, 1.0]))
    data = observation_batch()
    torch.testing.assert_close(_loss(module, data, torch.ones(2)), _loss(module, data))
    torch.testing.assert_close(_loss(module, data, torch.full((2,), 0.1)), _loss(module, data))  # weights below 1
    if reduction != "dataset":                              # "dataset" divides by the batch's size, not its targets
        torch.testing.assert_close(_loss(module, data, torch.tensor([0.0, 1.0])), _loss(module, _subset(data, [1])))
    torch.testing.assert_close(_loss(module, data, torch.tensor([2.0, 1.0])), _loss(module, _subset(data, [0, 0, 1])))
    assert _loss(module, data, torch.tensor([2.0, 1.0])) != _loss(module, data)
    nothing = _loss(module, data, torch.zeros(2))
    assert nothing == 0.0 and nothing.requires_grad


def decoder(**kwargs):
    return ForecastModule("decoder", n_channels=3, lookback=32, horizon=8,
                          model_kwargs={"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16}, **kwargs)


@pytest.mark.parametrize("build,quantiles", [(window, None), (window, [0.1, 0.9]), (decoder, None)])
def test_a_window_weight_counts_it_that_many_times(build, quantiles):
    torch.manual_seed(0)
    module = build(quantiles=quantiles).eval()           # PatchTST's batch norm: each window alone in eval mode
    data = window_batch()
    torch.testing.assert_close(_loss(module, data, torch.ones(4)), _loss(module, data))
    torch.testing.assert_close(_loss(module, data, torch.tensor([0.0, 1.0, 1.0, 2.0])),
                               _loss(module, _subset(data, [1, 2, 3, 3])))
    torch.testing.assert_close(_loss(module, data, torch.full((4,), 0.1)), _loss(module, data))   # weights below 1
    assert _loss(module, data, torch.zeros(4)) == 0.0


@pytest.mark.parametrize("build,batch", [(irregular, observation_batch), (window, window_batch)])
def test_bootstrap_gives_each_member_its_own_draw(build, batch):
    torch.manual_seed(0)
    module = build(ensemble=2, bootstrap=True)
    data = batch()
    n = module.task.batch_size(data)
    torch.manual_seed(5)
    draws = [torch.poisson(torch.ones(n)) for _ in range(2)]
    assert not torch.equal(draws[0], draws[1])                            # the two members resample differently
    expected = sum(_loss(module, data, w, member) for member, w in zip(module.net.members, draws))
    torch.manual_seed(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                                   # self.log without a Trainer
        loss = module.training_step(data, 0)
    torch.testing.assert_close(loss, expected)
    assert not torch.allclose(loss, sum(_loss(module, data, None, member) for member in module.net.members))


@pytest.mark.parametrize("kwargs,match", [({"bootstrap": True}, "ensemble to 2 or more"),
                                          ({"ensemble": 2, "bootstrap": "yes"}, "True or False")])
def test_bad_bootstrap_settings_say_so(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Forecaster("irregular", **kwargs)


def test_a_bootstrapped_fit_is_saved_and_combines_with_plain_fits(tmp_path):
    table = observations()
    bagged = _fit_irregular(table, 1, ensemble=2, bootstrap=True)
    plain = _fit_irregular(table, 1, ensemble=2)
    at = [table["hours"].max() + 1.0]
    assert not np.allclose(bagged.predict(at=at)["value"], plain.predict(at=at)["value"])  # the draws mattered
    g = Forecaster.load(bagged.save(tmp_path / "bagged.ckpt"))
    assert g.config["bootstrap"] is True and g.module.hparams.bootstrap is True
    assert Forecaster.combine([bagged, plain]).module.hparams.ensemble == 4
