"""Checkpoint ensembles of finished irregular runs: the best epoch against the mean of the k best epochs.

    python benchmarks/run_protocol.py --config configs/physionet2012/irregular_continuous.yaml --seed S \
        --keep-checkpoints --no-test --threads 1 --resume --runs-dir runs/keep        # every epoch's checkpoint
    python benchmarks/checkpoint_ensembles.py runs/keep/physionet2012_irregular_continuous_s1 \
        runs/keep/physionet2012_irregular_continuous_s2 --k 3 --out benchmarks/results/checkpoint_ensembles.jsonl
    # the same with --test: the test split too (read once, for variants fixed beforehand on validation)

Each run folder must hold the checkpoints ``run_protocol.py --keep-checkpoints`` writes, one per epoch, named
``epoch=E-val_mse=V.ckpt``; they are ranked by that validation MSE. Per run, three forecasts of every target:
``best epoch`` (what the protocol tests), ``prediction mean`` (the forecasts of the k best epochs averaged)
and ``weight mean`` (one model whose weights are the k best epochs' averaged: what
``tsattn.lightning.BestEpochsAverage`` and ``Forecaster.fit(average_best=k)`` give when training ends). With
more than one run (seeds of one model), also the mean over the runs of each run's best-epoch forecast and of each
run's prediction mean, of each run's weights' mean, and of ensembles of 1, 2, ... of the runs' weights' means
(averaged over the subsets of that size). ``--members``: for a run of an ``ensemble=k`` model, also each member of
its weights' mean alone and the members' mean (how much the one fit's members gain by averaging). The runs may be
variants of one model (each checkpoint is read with its own settings), fit on the same data. Every forecast is
``Forecaster.backtest(cutoffs=origins)`` over all series of the fit's data (the data read and scaled the fit's way,
the protocol's origins); metrics per split: the protocol's, per variable over every target, MSE and MAE on the
scaled data, then the mean over variables. The validation
split by default; ``--test`` adds the test split. Nothing is trained.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
import warnings
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.fit_data import FitData  # noqa: E402
from benchmarks.run_protocol import git_commit, kept_checkpoints  # noqa: E402
from tsattn.metrics import backtest_metrics  # noqa: E402


def ranked_checkpoints(run_dir: pathlib.Path) -> list[tuple[float, int, pathlib.Path]]:
    """(val MSE, epoch from 1, path) of each kept checkpoint under ``run_dir``, best first."""
    rows = kept_checkpoints(run_dir)
    if not rows:
        raise SystemExit(f"{run_dir}: no checkpoints named epoch=E-val_mse=V.ckpt; train the run with "
                         f"run_protocol.py --keep-checkpoints, which keeps one per epoch under these names")
    return rows


def protocol_metrics(forecast: np.ndarray, observed: np.ndarray, scale: np.ndarray,
                     variable: np.ndarray) -> dict[str, float]:
    """MSE and MAE on the scaled data (forecast and observed / each target's variable scale): per variable,
    then the mean over variables (``tsattn.metrics.backtest_metrics(per_variable=True)``)."""
    frame = pd.DataFrame({"variable": variable, "forecast": np.asarray(forecast, dtype=np.float64) / scale,
                          "observed": np.asarray(observed, dtype=np.float64) / scale})
    metrics = backtest_metrics(frame, per_variable=True).iloc[0]
    return {"mse": float(metrics["mse"]), "mae": float(metrics["mae"])}


class _Targets:
    """Every target of the fit's data at the protocol's origins, and which split each belongs to."""

    def __init__(self, forecaster: Any, checkpoint: pathlib.Path, splits: Sequence[str]) -> None:
        self.forecaster, self.checkpoint = forecaster, checkpoint        # the first run's, loaded from checkpoint
        data = FitData.of(self.forecaster, str(checkpoint))      # every backtest reuses the data read once
        self.origins, self.id_column, self.variable_column = data.origins, data.id_column, data.variable_column
        frame = self._backtest()
        self.key = frame[[self.id_column, self.variable_column]].to_numpy()
        self.observed = frame["observed"].to_numpy(np.float64)
        self.variable = frame[self.variable_column].to_numpy()
        self.scale = frame[self.variable_column].map(data.scale).to_numpy()
        self.masks = {split: frame[self.id_column].isin(data.series_ids(split)).to_numpy() for split in splits}

    def _backtest(self, forecaster: Any = None) -> pd.DataFrame:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")                       # in-sample warnings: the train series
            return (forecaster or self.forecaster).backtest(cutoffs=self.origins).reset_index(drop=True)

    def attach(self, forecaster: Any, checkpoint: pathlib.Path) -> Any:
        """``forecaster`` (loaded from ``checkpoint``, with its own settings: runs of variants of one model can
        differ in them) on the data read once; a run fit on other data is refused."""
        if forecaster.data_record != self.forecaster.data_record:
            raise SystemExit(f"{checkpoint}: fit on other data than the first run's ({self.checkpoint}); "
                             f"ensembles are measured on the same targets")
        forecaster.datamodule = self.forecaster.datamodule
        return forecaster

    def forecast(self, state_dict: dict[str, Any], forecaster: Any = None) -> np.ndarray:
        """The forecast of every target by ``forecaster`` (the first run's by default) with ``state_dict``."""
        forecaster = forecaster or self.forecaster
        forecaster.module.load_state_dict(state_dict)
        frame = self._backtest(forecaster)
        if len(frame) != len(self.key) or not (frame[[self.id_column, self.variable_column]].to_numpy()
                                                == self.key).all():
            raise SystemExit("a checkpoint's forecasts do not line up with the first's: runs of other data")
        return frame["forecast"].to_numpy(np.float64)

    def metrics(self, forecast: np.ndarray) -> dict[str, float]:
        out = {}
        for split, mask in self.masks.items():
            for name, value in protocol_metrics(forecast[mask], self.observed[mask], self.scale[mask],
                                                self.variable[mask]).items():
                out[f"{split}_{name}"] = value
        return out


def member_states(module: Any) -> list[dict[str, Any]]:
    """The state dict of a one-net module per member of ``module``'s ensemble (``members_of``; the module's
    entries outside its net with each); [] for a one-net module."""
    from tsattn.models.ensemble import Ensemble, members_of

    if not isinstance(module.net, Ensemble):
        return []
    shared = {key: value for key, value in module.state_dict().items() if not key.startswith("net.")}
    return [{**shared, **{f"net.{key}": value for key, value in member.state_dict().items()}}
            for member in members_of(module.net)]


def _one_net(forecaster: Any) -> Any:
    """A copy of a fitted ``ensemble=k`` Forecaster around a one-net module of its settings (weights to load)."""
    import copy

    from tsattn.lightning import ForecastModule

    single = copy.copy(forecaster)
    single.module = ForecastModule(**{**forecaster.module.hparams, "ensemble": 1, "bootstrap": False})
    return single


def evaluate(runs: Sequence[pathlib.Path], k: int, splits: Sequence[str],
             weight_mean_only: bool = False, members: bool = False) -> list[dict[str, Any]]:
    """The records (see the module docstring) of ``runs``, k best epochs each; ``weight_mean_only``: per run
    only the weights' mean (one forecast per run instead of k + 1); ``members``: each member of an ensemble
    run's weights' mean alone, and their mean."""
    import torch

    from tsattn.lightning import mean_state_dicts

    if k < 1:
        raise SystemExit(f"--k wants 1 or more; got {k}")
    ranked = {run: ranked_checkpoints(run)[:k] for run in runs}
    from tsattn import Forecaster

    # every run's model, read once: a checkpoint that cannot be read fails here, before the backtests
    models = {run: Forecaster.load(ranked[run][0][2]) for run in runs}
    targets = _Targets(models[runs[0]], ranked[runs[0]][0][2], splits)
    records: list[dict[str, Any]] = []
    pooled: dict[str, list[np.ndarray]] = {"best epochs": [], "prediction means": [], "weight means": []}
    for run in runs:
        rows = ranked[run]
        states = [torch.load(path, map_location="cpu", weights_only=True)["state_dict"] for _, _, path in rows]
        model = targets.attach(models[run], rows[0][2])
        mean_state = mean_state_dicts(states)
        variants = {"weight mean": (targets.forecast(mean_state, model), rows)}
        nets = member_states(model.module) if members else []        # the weights' mean's, loaded just above
        if nets:
            single = _one_net(model)
            scores = [targets.metrics(targets.forecast(state, single)) for state in nets]
            for i, score in enumerate(scores):
                records.append({"run": _run_name(run), "variant": f"weight mean: member {i + 1} alone", "k": len(rows),
                                "epochs": [epoch for _, epoch, _ in rows], "logged_val_mse": None, **score})
            records.append({"run": _run_name(run), "variant": "weight mean: members alone, their mean", "k": len(rows),
                            "epochs": [epoch for _, epoch, _ in rows], "logged_val_mse": None,
                            **{key: float(np.mean([score[key] for score in scores])) for key in scores[0]}})
        if not weight_mean_only:
            forecasts = [targets.forecast(state, model) for state in states]
            variants = {"best epoch": (forecasts[0], rows[:1]), "prediction mean": (np.mean(forecasts, axis=0), rows),
                        **variants}
        for variant, (forecast, used) in variants.items():
            records.append({"run": _run_name(run), "variant": variant, "k": len(used),
                            "epochs": [epoch for _, epoch, _ in used],
                            "logged_val_mse": [value for value, _, _ in used], **targets.metrics(forecast)})
        for variant, pool in (("best epoch", "best epochs"), ("prediction mean", "prediction means"),
                              ("weight mean", "weight means")):
            if variant in variants:
                pooled[pool].append(variants[variant][0])
    if len(runs) > 1:
        name = "+".join(_run_name(run) for run in runs)
        for pool, forecasts in pooled.items():
            if forecasts:
                records.append({"run": name, "variant": f"runs: {pool}", "k": k, "epochs": None,
                                "logged_val_mse": None, **targets.metrics(np.mean(forecasts, axis=0))})
        records.extend(ensemble_sizes(pooled["weight means"], targets, k, name))
    return records


def _run_name(run: pathlib.Path) -> str:
    """A run folder's name with its parent's (runs of several trials share the leaf name)."""
    run = pathlib.Path(run)
    return f"{run.parent.name}/{run.name}"


def ensemble_sizes(forecasts: Sequence[np.ndarray], targets: "_Targets", k: int, name: str,
                   max_subsets: int = 60) -> list[dict[str, Any]]:
    """For each size n of an ensemble of the runs' weight means: the metrics of the mean forecast of n runs,
    averaged over the subsets of n runs (every subset, or ``max_subsets`` drawn without repeats, seed 0)."""
    import itertools

    runs = len(forecasts)
    rng = np.random.default_rng(0)
    records = []
    for size in range(1, runs + 1):
        subsets = list(itertools.combinations(range(runs), size))
        if len(subsets) > max_subsets:
            subsets = [subsets[i] for i in sorted(rng.choice(len(subsets), max_subsets, replace=False))]
        scores = [targets.metrics(np.mean([forecasts[i] for i in subset], axis=0)) for subset in subsets]
        summary = {key: float(np.mean([score[key] for score in scores])) for key in scores[0]}
        spread = {f"{key}_std": float(np.std([score[key] for score in scores])) for key in scores[0]}
        records.append({"run": name, "variant": f"ensemble of {size} weight means", "k": k, "epochs": None,
                        "logged_val_mse": None, "subsets": len(subsets), **summary, **spread})
    return records


def main(argv: Optional[Sequence[str]] = None) -> list[dict[str, Any]]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=pathlib.Path, help="run folders of run_protocol.py --keep-checkpoints")
    parser.add_argument("--k", type=int, default=3, help="the k best epochs of each run (default 3)")
    parser.add_argument("--test", action="store_true", help="the test split too (fix the variants on validation first)")
    parser.add_argument("--weight-mean-only", action="store_true",
                        help="per run only the weights' mean of its k best epochs (one forecast per run)")
    parser.add_argument("--members", action="store_true",
                        help="an ensemble=k run: each member of its weights' mean alone too, and their mean")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--tag", default="", help="free text stored with each record")
    parser.add_argument("--out", type=pathlib.Path, help="append the records here as JSON lines")
    args = parser.parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    stamp = {"commit": git_commit(),           # the code this evaluation imports: taken before HEAD may move
             "command": " ".join(["checkpoint_ensembles.py", *(sys.argv[1:] if argv is None else argv)]),
             "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag}
    records = evaluate(args.runs, args.k, ["val", "test"] if args.test else ["val"], args.weight_mean_only,
                       args.members)
    for record in records:
        record.update(stamp)
        print(json.dumps(record))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "a") as fh:
            fh.writelines(json.dumps(record) + "\n" for record in records)
    return records


if __name__ == "__main__":
    main()
