"""BestEpochsAverage and Forecaster.fit(average_best=k): the k best validation epochs are kept and the
model ends with the mean of their weights (not the best epoch's, which Forecaster otherwise reloads);
its state survives a checkpoint; bad arguments raise before anything is read."""
import pytest
import torch

from tsattn import Forecaster
from tsattn.lightning import BestEpochsAverage, mean_state_dicts

from ..synthetic import LONG, observations

TINY = {"d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "dropout": 0.0}
QUIET = dict(logger=False, enable_progress_bar=False, enable_model_summary=False)


def fit(callbacks=None, **options):
    f = Forecaster("irregular", lookback=24.0, horizon=24.0, model_kwargs=TINY, lr=0.02, lr_schedule="constant",
                   batch_size=4, seed=3)
    data = observations(n_series=10, hours=48, seed=0, resolution=0.5, id_format="p{:02d}")
    return f.fit(data, origins=[24.0], split_fractions=[0.6, 0.2, 0.2], max_epochs=4, limit_train_batches=3,
                 callbacks=callbacks, **QUIET, **LONG, **options)


def test_mean_state_dicts_averages_floating_entries_only():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3), "h": torch.tensor([0.5], dtype=torch.float16), "x": {"k": 1}}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(5), "h": torch.tensor([1.5], dtype=torch.float16), "x": {"k": 2}}
    out = mean_state_dicts([a, b])
    torch.testing.assert_close(out["w"], torch.tensor([2.0, 4.0]))
    assert out["n"].item() == 3 and out["x"] == {"k": 1}                    # not averaged: the first's
    assert out["h"].dtype == torch.float16 and out["h"].item() == 1.0
    with pytest.raises(ValueError, match="different parameters"):
        mean_state_dicts([a, {"w": a["w"]}])
    with pytest.raises(ValueError, match="no state dicts"):
        mean_state_dicts([])


def test_the_model_ends_with_the_mean_of_its_k_best_epochs():
    average = BestEpochsAverage(k=2)
    f = fit(callbacks=[average])
    scores = [score for _, score in average.scores]
    assert len(scores) == 4                                                     # every epoch, not the sanity check
    best_two = sorted(range(4), key=lambda e: (scores[e], e))[:2]
    assert [epoch for _, epoch, _ in average.kept] == best_two == average.averaged_epochs
    expected = mean_state_dicts([weights for _, _, weights in average.kept])
    got = f.module.state_dict()
    for name, value in expected.items():
        if torch.is_tensor(value):
            torch.testing.assert_close(got[name], value)                        # Forecaster kept the mean
    f.trainer.validate(f.module, datamodule=f.datamodule, verbose=False)         # after fit: ranks nothing
    assert len(average.scores) == 4 and average.averaged_epochs == best_two
    best = average.kept[0][2]
    assert any(not torch.equal(got[n], best[n]) for n in best if torch.is_tensor(best[n]) and best[n].is_floating_point())
    # the same through fit(average_best=2): the same run, the same mean
    g = fit(average_best=2)
    for name, value in got.items():
        if torch.is_tensor(value):
            torch.testing.assert_close(g.module.state_dict()[name], value)


def test_k_one_is_the_best_epoch_and_state_round_trips():
    average = BestEpochsAverage(k=1, monitor="val_mse")
    f = fit(callbacks=[average])
    (score, epoch, weights), = average.kept
    assert score == min(s for _, s in average.scores)
    for name, value in weights.items():
        if torch.is_tensor(value):
            torch.testing.assert_close(f.module.state_dict()[name], value)
    restored = BestEpochsAverage(k=1)
    restored.load_state_dict(average.state_dict())
    assert [(s, e) for s, e, _ in restored.kept] == [(score, epoch)] and restored.scores == average.scores


def test_bad_arguments_raise_before_reading():
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="`k` must be an integer >= 1"):
            BestEpochsAverage(k=k)
    with pytest.raises(ValueError, match="`mode` must be"):
        BestEpochsAverage(mode="lowest")
    f = Forecaster("irregular", lookback=24.0, horizon=24.0, model_kwargs=TINY)
    with pytest.raises(ValueError, match="`k` must be"):
        f.fit("no-such-file.csv", average_best=0)                              # the k, not the missing file
    with pytest.raises(RuntimeError, match="monitored metric 'val_loss_typo' was not logged"):
        fit(callbacks=[BestEpochsAverage(monitor="val_loss_typo")])


def test_save_to_writes_the_mean_as_a_checkpoint_forecaster_loads(tmp_path):
    target = tmp_path / "models" / "average.ckpt"
    average = BestEpochsAverage(k=2, save_to=target)
    f = fit(callbacks=[average])
    g = Forecaster.load(target)
    for name, value in f.module.state_dict().items():
        if torch.is_tensor(value):
            torch.testing.assert_close(g.module.state_dict()[name], value)      # the mean, not an epoch
    data = observations(n_series=10, hours=48, seed=0, resolution=0.5, id_format="p{:02d}")   # fit() read the same
    torch.testing.assert_close(torch.tensor(g.evaluate("val", data=data)["mse"]), torch.tensor(f.evaluate("val")["mse"]))
