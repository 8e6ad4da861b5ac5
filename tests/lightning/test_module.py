"""ForecastModule: metrics, schedules, the attention switch, exact resume, DDP on CPU."""
import math
import warnings

import lightning.pytorch as pl
import pytest
import torch

from tsattn.data import CSVDataModule
from tsattn.lightning import AttentionSwitch, ForecastModule
from tsattn.nn import MultiHeadAttention


def trainer(tmp_path, **kw):
    defaults = dict(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                    enable_model_summary=False, enable_checkpointing=False, default_root_dir=tmp_path,
                    deterministic=True)
    defaults.update(kw)
    return pl.Trainer(**defaults)


def module_for(dm, model_kwargs, **kw):
    return ForecastModule(kw.pop("model", "patchtst"), n_channels=dm.n_channels_in, lookback=dm.lookback,
                          horizon=dm.horizon, target_index=dm.target_index, model_kwargs=model_kwargs, **kw)


def test_original_scale_metrics_use_the_train_scaler(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, features="S", target="OT", batch_size=64)
    dm.setup()
    module = module_for(dm, tiny)
    out = trainer(tmp_path).test(module, datamodule=dm, verbose=False)[0]
    scale = float(dm.scaler.scale[0])
    assert out["test_mse_orig"] == pytest.approx(out["test_mse"] * scale**2, rel=1e-4)
    assert out["test_mae_orig"] == pytest.approx(out["test_mae"] * scale, rel=1e-4)
    # and the scaled MSE is the plain mean over every test window, horizon step and channel
    module.eval()
    with torch.no_grad():
        errs = [(module(b) - b["y"]) ** 2 for b in dm.test_dataloader()]
    assert out["test_mse"] == pytest.approx(torch.cat(errs).mean().item(), rel=1e-5)
    assert sum(e.shape[0] for e in errs) == len(dm.test_dataset)


def test_ms_features_forecast_only_the_target(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, features="MS", target="OT", batch_size=64)
    module = module_for(dm, tiny)
    assert dm.n_channels_in == 3 and dm.target_index == [2]
    batch = next(iter(dm.train_dataloader()))
    assert module(batch).shape == (64, 12, 1)


@pytest.mark.parametrize("model", ["patchtst", "decoder"])
def test_ms_on_a_channel_independent_model_warns_and_ignores_the_other_columns(tmp_path, frame, tiny, tiny_decoder,
                                                                                model):
    dm = CSVDataModule(frame, 48, 12, features="MS", target="OT", batch_size=64, seed=0)
    module = module_for(dm, tiny if model == "patchtst" else tiny_decoder, model=model, lr=1e-3)
    assert module.net.channel_independent
    with pytest.warns(UserWarning, match="features='S'") as record:
        trainer(tmp_path, max_epochs=2, limit_train_batches=2, limit_val_batches=1).fit(module, dm)
    assert sum("channel-independent" in str(w.message) for w in record) == 1  # once per fit, not per epoch
    # in eval mode the target's forecast depends on the target's own history alone
    module.eval()
    item = dm.test_dataset[5]
    x = item["x"][None].repeat(2, 1, 1)
    x[1, :, :2] = 10.0 * torch.randn(48, 2)  # other columns: new values (the target column, last, unchanged)
    with torch.no_grad():
        out = module({"x": x, "t_x": item["t_x"][None].repeat(2, 1)})                     # [2, 12, 1]
        full = module.net(x, item["t_x"][None].repeat(2, 1))               # [2, 12, 3]: every channel's forecast
    assert not torch.allclose(full[0, :, :2], full[1, :, :2], atol=1e-3)  # the other channels' forecasts moved
    # the target rows of the batch are computed independently of the others: equal up to fp32 rounding
    torch.testing.assert_close(out[1], out[0], rtol=1e-6, atol=1e-6)


def test_ms_warning_is_only_for_channel_independent_models(tmp_path, frame, tiny, monkeypatch):
    dm = CSVDataModule(frame, 48, 12, features="MS", target="OT", batch_size=64, seed=0)
    module = module_for(dm, tiny)
    monkeypatch.setattr(type(module.net), "channel_independent", False)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*channel-independent.*")
        trainer(tmp_path, max_epochs=1, limit_train_batches=1, limit_val_batches=1).fit(module, dm)


@pytest.mark.parametrize("model", ["patchtst", "decoder"])
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_training_lowers_validation_error(tmp_path, frame, tiny, tiny_decoder, model, attention):
    dm = CSVDataModule(frame, 48, 12, batch_size=32, seed=0)
    kwargs = tiny if model == "patchtst" else tiny_decoder
    module = module_for(dm, kwargs, model=model, attention=attention, lr=3e-3, lr_schedule="constant", seed=0)
    t = trainer(tmp_path, max_epochs=4)
    before = t.validate(module, datamodule=dm, verbose=False)[0]["val_mse"]
    t.fit(module, datamodule=dm)
    after = t.validate(module, datamodule=dm, verbose=False)[0]["val_mse"]
    assert after < 0.7 * before


def test_type3_schedule_matches_patchtst(tmp_path, frame, tiny):
    """PatchTST calls adjust_learning_rate(optimizer, epoch + 1, args) after each epoch, with type3 =
    lr if e < 3 else lr * 0.9 ** (e - 3): 0-based epochs 0-3 train at lr, epoch 4 at 0.9 lr, ..."""
    dm = CSVDataModule(frame, 48, 12, batch_size=128, seed=0)
    module = module_for(dm, tiny, lr=1e-3, lr_schedule="type3")
    used = {}  # epoch -> the learning rates of the optimizer steps taken in it

    class Record(pl.Callback):
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            used.setdefault(trainer.current_epoch, []).append(trainer.optimizers[0].param_groups[0]["lr"])

    trainer(tmp_path, max_epochs=7, callbacks=[Record()], limit_train_batches=2, limit_val_batches=1).fit(module, dm)
    assert sorted(used) == list(range(7)) and all(len(set(lrs)) == 1 for lrs in used.values())
    per_epoch = [lrs[0] for _, lrs in sorted(used.items())]
    assert per_epoch == pytest.approx([1e-3, 1e-3, 1e-3, 1e-3, 9e-4, 8.1e-4, 7.29e-4], rel=1e-12)


@pytest.mark.parametrize("optimizer", ["adam", "adamw"])
def test_weight_decay_of_adam_and_adamw(frame, tiny, optimizer):
    """One step with a zero gradient: Adam's L2 term is a gradient of weight_decay * w, which its normalised
    step turns into about lr per weight; AdamW shrinks each weight by lr * weight_decay * w."""
    dm = CSVDataModule(frame, 48, 12, batch_size=64, seed=0)
    module = module_for(dm, tiny, lr=1e-2, lr_schedule="constant", weight_decay=0.1, optimizer=optimizer)
    opt = module.configure_optimizers()
    before = [p.detach().clone() for p in module.parameters()]
    for p in module.parameters():
        p.grad = torch.zeros_like(p)
    opt.step()
    w, w0 = torch.cat([p.detach().flatten() for p in module.parameters()]), torch.cat([b.flatten() for b in before])
    moved = w0.abs() > 1e-3          # (Adam's eps makes the step of a tinier weight's gradient smaller)
    if optimizer == "adamw":
        assert torch.allclose(w, w0 * (1 - 1e-2 * 0.1), rtol=1e-6, atol=0)
    else:
        assert torch.allclose((w0 - w)[moved], 1e-2 * torch.sign(w0[moved]), rtol=1e-3)
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        module_for(dm, tiny, optimizer="sgd")


def test_onecycle_schedule_steps_per_batch(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, batch_size=64, seed=0)
    module = module_for(dm, tiny, lr=1e-3, lr_schedule="onecycle", pct_start=0.4)
    t = trainer(tmp_path, max_epochs=2)
    t.fit(module, dm)
    sched = t.lr_scheduler_configs[0].scheduler
    assert t.lr_scheduler_configs[0].interval == "step"
    assert sched.total_steps == 2 * math.ceil(len(dm.train_dataset) / 64)


def test_attention_switch_mid_training_and_reload(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, batch_size=64, seed=0)
    module = module_for(dm, tiny, attention="softmax", lr=1e-3)
    seen = []

    class Record(pl.Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            seen.append({m.attention for m in pl_module.modules() if isinstance(m, MultiHeadAttention)})

    t = trainer(tmp_path, max_epochs=3, callbacks=[AttentionSwitch(1, "continuous"), Record()])
    t.fit(module, dm)
    assert seen == [{"softmax"}, {"continuous"}, {"continuous"}]
    path = tmp_path / "switched.ckpt"
    t.save_checkpoint(path)
    reloaded = ForecastModule.load_from_checkpoint(path, weights_only=True)
    assert reloaded.hparams.attention == "softmax"  # as built ...
    assert {m.attention for m in reloaded.modules() if isinstance(m, MultiHeadAttention)} == {"continuous"}  # ... as trained


def test_resume_from_checkpoint_repeats_an_uninterrupted_run(tmp_path, frame, tiny):
    def run(max_epochs, ckpt_path=None, save=None):
        pl.seed_everything(5, verbose=False)
        dm = CSVDataModule(frame, 48, 12, batch_size=64, seed=5)
        module = module_for(dm, tiny, attention="continuous", lr=1e-3, seed=5)  # dropout 0.1 is on
        t = trainer(tmp_path, max_epochs=max_epochs)
        t.fit(module, dm, ckpt_path=ckpt_path)
        if save:
            t.save_checkpoint(save)
        return module.state_dict()

    # exact: both runs take the same steps on the same bits in one process at one thread count, so
    # any difference is state the checkpoint failed to restore
    straight = run(3)
    ckpt = tmp_path / "epoch1.ckpt"
    run(1, save=ckpt)
    resumed = run(3, ckpt_path=ckpt)
    assert straight.keys() == resumed.keys()
    for key, value in straight.items():
        same = torch.equal(value, resumed[key]) if isinstance(value, torch.Tensor) else value == resumed[key]
        assert same, key


def test_bad_hyperparameters_raise(frame):
    with pytest.raises(ValueError, match="`loss` must be one of"):
        ForecastModule(loss="rmse")
    with pytest.raises(ValueError, match="`attention` must be one of"):
        ForecastModule(attention="linear")
    with pytest.raises(ValueError, match="`lr_schedule` must be one of"):
        ForecastModule(lr_schedule="cosine")
    with pytest.raises(ValueError, match="target_index"):
        ForecastModule(n_channels=3, target_index=[3])
    with pytest.raises(ValueError, match="unknown model"):
        ForecastModule(model="informer")


def test_channel_mismatch_with_the_data_is_reported(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, batch_size=64)
    module = ForecastModule(n_channels=5, lookback=48, horizon=12, model_kwargs=tiny)
    with pytest.raises(ValueError, match="n_channels=3"):
        trainer(tmp_path, max_epochs=1).fit(module, dm)


class _DestroyProcessGroup(pl.Callback):
    """In each spawned process, end its gloo process group when the stage is over: left to the
    interpreter's exit, its threads can abort the process ("terminate called without an active
    exception"), about one run in six here."""

    def teardown(self, trainer, pl_module, stage):
        trainer.strategy.barrier()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


def _ddp_fit_and_test(tmp_path, frame, tiny):
    dm = CSVDataModule(frame, 48, 12, batch_size=64, seed=0)
    module = module_for(dm, tiny, attention="continuous", lr=1e-3)
    t = pl.Trainer(accelerator="cpu", strategy="ddp_spawn", devices=2, max_epochs=1, logger=False,
                   enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                   default_root_dir=tmp_path, callbacks=[_DestroyProcessGroup()])
    t.fit(module, dm)
    return t.test(module, datamodule=dm, verbose=False)[0]


def test_ddp_spawn_on_two_cpu_processes(tmp_path, frame, tiny):
    try:
        result = _ddp_fit_and_test(tmp_path, frame, tiny)
    finally:
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    assert set(result) >= {"test_mse", "test_mae", "test_mse_orig", "test_mae_orig"}
    assert all(math.isfinite(v) and v > 0 for v in result.values())
