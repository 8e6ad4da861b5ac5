"""Train and test one model under the standard long-horizon protocol; append the result.

    python benchmarks/run_protocol.py --dataset ETTh1 --attention softmax --epochs 100 --seed 2021
    python benchmarks/run_protocol.py --config configs/ETTh1/patchtst_continuous_96.yaml --epochs 30
    python benchmarks/run_protocol.py --config configs/physionet2012/irregular_continuous.yaml --seed 1 \
        --set model.lr=0.0003 --set model.model_kwargs.n_layers=3

A run reads a config of ``configs/`` (default: ``configs/<dataset>/patchtst_<attention>_<horizon>.yaml``)
and builds the trainer, model and data module from it exactly as ``tsattn fit --config`` does
(``tsattn.cli.build_cli``): every trainer, model and data option of the config takes effect. The
command-line overrides below change the config before it is built; then the run trains, tests the
best validation checkpoint on every test window, and appends one JSON line to
``benchmarks/results/runs.jsonl`` with the metrics, epochs, steps, seconds per epoch, command and
git commit.

What the runner adds to a config: each run lives in ``runs/<name>/`` (the name: data, model, attention,
seed, then ``_series<L>`` for the irregular model's series sequence, ``_split<S>`` for a split seed set in
the config, ``_switch<E>``, ``_ema<DECAY>``, ``_avg<K>``; ``--runs-dir``; this replaces
``trainer.default_root_dir``, so that seeds and variants of one config do not share a folder), a
``CSVLogger`` there when the config sets no logger, no progress bar unless the config asks for
one, an ``EpochTimer``, and a ``ModelCheckpoint`` on ``val_mse`` when the config has none (the
test uses the best validation checkpoint).

``--ema DECAY`` adds Lightning's ``EMAWeightAveraging`` (an exponential moving average of the weights,
updated after every step): validation, the checkpoints and so the test read the averaged weights, and
the run's name ends in ``_ema<DECAY>``.

``--average-best K`` adds ``tsattn.lightning.BestEpochsAverage``: when training ends the model holds the
mean of the weights of its K best validation epochs; that mean is validated once more (``averaged_val_mse``)
and is what the test reads, and the run's name ends in ``_avg<K>``.

``--keep-checkpoints`` keeps the ``val_mse`` checkpoint of every epoch, named ``epoch=E-val_mse=V.ckpt``
(the best is still the one tested), for ``benchmarks/checkpoint_ensembles.py``.

``--resume`` lets a long run survive an interruption (a stopped machine, a killed process): its
``val_mse`` checkpoints go to ``runs/<name>/checkpoints/`` with a ``last.ckpt`` after every epoch, and
the same command started again continues from that ``last.ckpt`` (weights, optimizer, schedule,
early-stopping count, best checkpoint and epoch timings; the batches drawn are those of an
uninterrupted run) instead of starting over; a run folder moved or copied since (another checkout, a
renamed ``--runs-dir``) resumes too, its checkpoint paths pointed at the new place. A finished run
leaves ``runs/<name>/record.json``; the same command with ``--resume`` then prints that record and runs
nothing, so a list of runs can simply be started again until every one is done. The record says at
which epoch a run resumed. The run's name does not spell out every setting (a ``--set
model.lr_schedule=onecycle`` variant has the name of the run without it), so the folder also keeps
``settings.json``, the configuration after the overrides; a ``--resume`` whose settings differ from it
(other than ``trainer.max_epochs``, which may grow, and the accelerator and devices) is refused with the
keys that differ, before anything is trained or printed as finished.
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import pathlib
import platform
import re
import subprocess
import sys
import time
from typing import Any, Optional, Sequence

import torch
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint  # noqa: E402

from tsattn.cli import build_cli  # noqa: E402
from tsattn.lightning import BestEpochsAverage, EpochTimer  # noqa: E402


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":(exclude)benchmarks/results"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
        return out.stdout.strip() + ("-dirty" if dirty else "")
    except OSError:
        return "unknown"


def data_arguments(config: dict[str, Any]) -> dict[str, Any]:
    """The data module's arguments in a config (under ``init_args`` when ``data`` names a ``class_path``)."""
    data = config.setdefault("data", {})
    return data.setdefault("init_args", {}) if "class_path" in data else data


def _is(entry: Any, name: str) -> bool:
    return isinstance(entry, dict) and str(entry.get("class_path", "")).endswith(name)


# --keep-checkpoints: one checkpoint per epoch, named by its epoch and validation MSE
# (benchmarks/checkpoint_ensembles.py ranks them by it)
KEPT_CHECKPOINT_NAME = "{epoch}-{val_mse:.6f}"
KEPT_CHECKPOINT_RE = re.compile(r"^epoch=(\d+)-val_mse=([0-9.eE+-]+)\.ckpt$")


def kept_checkpoints(run_dir: pathlib.Path) -> list[tuple[float, int, pathlib.Path]]:
    """(val MSE, epoch from 1, path) of each ``--keep-checkpoints`` file (``epoch=E-val_mse=V.ckpt``) under
    ``run_dir``, best first (the earlier epoch on a tie); empty when there is none."""
    rows = [(float(m.group(2)), int(m.group(1)) + 1, path) for path in pathlib.Path(run_dir).rglob("*.ckpt")
            if (m := KEPT_CHECKPOINT_RE.match(path.name))]
    return sorted(rows, key=lambda row: (row[0], row[1]))


def best_checkpoint(run_dir: pathlib.Path) -> pathlib.Path:
    """The best validation epoch's checkpoint of a run: with ``--keep-checkpoints``' files (one per epoch,
    ``epoch=E-val_mse=V.ckpt``) the one of the lowest V; else the one checkpoint besides ``last.ckpt`` that
    a ``ModelCheckpoint`` on ``val_mse`` keeps. Exits naming the problem when there is none or several."""
    kept = kept_checkpoints(run_dir)
    if kept:
        return kept[0][2]
    found = [p for p in (pathlib.Path(run_dir) / "checkpoints").glob("*.ckpt") if p.name != "last.ckpt"]
    if len(found) != 1:
        raise SystemExit(f"{run_dir}/checkpoints: {'no checkpoint' if not found else f'{len(found)} checkpoints'} "
                         "besides last.ckpt, and none named epoch=E-val_mse=V.ckpt: give the best one's run, "
                         "or train with --keep-checkpoints")
    return found[0]


def apply_overrides(config: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """A copy of ``config`` with the command line's overrides applied (nothing else changes)."""
    config = copy.deepcopy(config)
    trainer, model, data = config.setdefault("trainer", {}), config.setdefault("model", {}), data_arguments(config)
    if args.attention:
        model["attention"] = args.attention
    if args.sink:
        model["sink"] = args.sink
    if args.rope:
        model["rope"] = True
    if args.model_kwargs:
        model["model_kwargs"] = {**(model.get("model_kwargs") or {}), **args.model_kwargs}
    if args.seed is not None:
        config["seed_everything"] = args.seed
    seed = config.get("seed_everything", 2021)
    model["seed"] = data["seed"] = seed
    if args.epochs:
        trainer["max_epochs"] = args.epochs
    if args.accelerator:
        trainer["accelerator"] = args.accelerator
    callbacks = trainer.setdefault("callbacks", [])
    if args.patience is not None:
        stops = [c for c in callbacks if _is(c, "EarlyStopping")]
        for c in stops:
            c.setdefault("init_args", {})["patience"] = args.patience
        if not stops:
            callbacks.append({"class_path": "lightning.pytorch.callbacks.EarlyStopping",
                              "init_args": {"monitor": "val_mse", "mode": "min", "patience": args.patience}})
    if args.switch_epoch is not None:
        model["attention"] = "softmax"
        callbacks.append({"class_path": "tsattn.lightning.AttentionSwitch",
                          "init_args": {"epoch": args.switch_epoch, "attention": "continuous"}})
    if args.ema is not None:
        if not 0.0 < args.ema < 1.0:
            raise SystemExit(f"--ema wants a decay in (0, 1), e.g. 0.999; got {args.ema}")
        callbacks.append({"class_path": "lightning.pytorch.callbacks.EMAWeightAveraging",
                          "init_args": {"decay": args.ema}})
    if args.average_best is not None:
        if args.average_best < 1:
            raise SystemExit(f"--average-best wants how many best epochs to average (1 or more); got {args.average_best}")
        callbacks.append({"class_path": "tsattn.lightning.BestEpochsAverage", "init_args": {"k": args.average_best}})
    if args.keep_checkpoints:
        kept = [c for c in callbacks if _is(c, "ModelCheckpoint") and (c.get("init_args") or {}).get("monitor") == "val_mse"]
        if not kept:
            kept = [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                     "init_args": {"monitor": "val_mse", "mode": "min"}}]
            callbacks.append(kept[0])
        for c in kept:
            c.setdefault("init_args", {}).update(save_top_k=-1, filename=KEPT_CHECKPOINT_NAME)
    return config


def set_option(config: dict[str, Any], assignment: str) -> None:
    """Apply one ``--set section.key.subkey=value`` (the value read as YAML) to ``config`` in place."""
    path, sep, text = assignment.partition("=")
    keys = path.strip().split(".")
    if not sep or not all(keys):
        raise SystemExit(f"--set wants section.key=value (e.g. model.lr=0.0003); got {assignment!r}")
    node = config
    for depth, key in enumerate(keys[:-1]):
        node = node.setdefault(key, {})
        if not isinstance(node, dict):
            raise SystemExit(f"--set {assignment!r}: {key!r} is not a section of the config")
        following = keys[depth + 1]
        if "init_args" in node and following not in node and following not in ("class_path", "init_args"):
            # a class_path section (e.g. the data module) takes its arguments under init_args; a key beside
            # them would reach LightningCLI as an unknown option with a generic error
            fixed = ".".join(keys[:depth + 1] + ["init_args"] + keys[depth + 1:])
            raise SystemExit(f"--set {assignment!r}: {'.'.join(keys[:depth + 1])!r} takes its arguments under "
                             f"init_args; write --set {fixed}={text}")
    node[keys[-1]] = yaml_value(text)


# a number in exponent form without a point (1e-5): YAML 1.2 reads it as a float, PyYAML (YAML 1.1) as a string
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def yaml_value(text: str) -> Any:
    """``text`` read as YAML, except that ``1e-5`` is the float it means, not the string PyYAML makes of it."""
    value = yaml.safe_load(text)
    if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(text.strip()):
        return float(value)
    return value


def _moved_path(path: Any, before: str, here: str) -> Any:
    """``path`` under folder ``before`` -> the same path under ``here``; anything else as it is."""
    if isinstance(path, str) and path.startswith(before + os.sep):
        return here + path[len(before):]
    return path


def relocate_checkpoint_paths(last: pathlib.Path, state: dict[str, Any]) -> bool:
    """Point the checkpoint callbacks' state in ``last`` (a run's ``last.ckpt``, read as ``state``) at the
    folder it now lies in.

    The state names its files by absolute path. Resumed from a folder that was moved or copied (another
    checkout, a renamed ``--runs-dir``), Lightning's ``ModelCheckpoint`` would keep only ``best_model_path``,
    pointing at the old place, and forget the best score, so that the first resumed epoch would become the
    "best" and the test would read it. The paths are rewritten (the same file written anew, atomically)
    when they name another folder; returns whether they did."""
    here = os.path.realpath(last.parent)
    moved = False
    for entry in state.get("callbacks", {}).values():
        before = entry.get("dirpath") if isinstance(entry, dict) else None
        if not isinstance(before, str) or before == here:
            continue
        entry["dirpath"] = here
        for key in ("best_model_path", "kth_best_model_path", "last_model_path"):
            if key in entry:
                entry[key] = _moved_path(entry[key], before, here)
        if isinstance(entry.get("best_k_models"), dict):
            entry["best_k_models"] = {_moved_path(k, before, here): v for k, v in entry["best_k_models"].items()}
        moved = True
    if moved:
        tmp = last.with_name(last.name + ".relocating")
        torch.save(state, tmp)
        os.replace(tmp, last)
        print(f"{last}: its checkpoint paths now name {here} (the run's folder was moved or copied)")
    return moved


# trainer options a resumed run may change: a longer run, another device
RESUME_MAY_CHANGE = ("max_epochs", "accelerator", "devices")


def run_settings(config: dict[str, Any], switch_epoch: Optional[int], ema: Optional[float]) -> dict[str, Any]:
    """What a resumed run must share with the run it continues: the configuration after the overrides (as
    JSON would store it), less the trainer options of ``RESUME_MAY_CHANGE``."""
    trainer = {k: v for k, v in (config.get("trainer") or {}).items() if k not in RESUME_MAY_CHANGE}
    settings = {**config, "trainer": trainer, "switch_epoch": switch_epoch, "ema": ema}
    return json.loads(json.dumps(settings, default=str))


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(node, dict):
        return {k: v for key, value in node.items() for k, v in _flat(value, f"{prefix}{key}.").items()} or \
            {prefix.rstrip("."): {}}
    return {prefix.rstrip("."): node}


def check_same_settings(run_dir: pathlib.Path, settings: dict[str, Any]) -> None:
    """Refuse to resume (or to report as finished) a run folder whose ``settings.json`` differs from
    ``settings``; a folder without one (a run from before it was written) is taken as it is."""
    stored = run_dir / "settings.json"
    if not stored.is_file():
        return
    before, now = _flat(json.loads(stored.read_text())), _flat(settings)
    unset = object()

    def show(value: Any) -> str:
        return "unset" if value is unset else repr(value)

    differ = [f"{key}: {show(before.get(key, unset))} there, {show(now.get(key, unset))} now"
              for key in sorted(set(before) | set(now)) if before.get(key, unset) != now.get(key, unset)]
    if differ:
        raise SystemExit(f"--resume: {run_dir} holds a run with other settings ({'; '.join(differ)}), and the "
                         f"run's name does not tell them apart. Give this variant a --runs-dir of its own, or "
                         f"remove that folder to start the run afresh.")


def run_name(config: dict[str, Any], switch_epoch: Optional[int], ema: Optional[float] = None) -> str:
    model, data = config.get("model", {}), data_arguments(config)
    dataset = str(data.get("data", "data"))
    dataset = pathlib.Path(dataset).stem if ("/" in dataset or dataset.endswith(".csv")) else dataset
    horizon = f"_h{data['horizon']}" if data.get("horizon") is not None else ""
    name = (f"{dataset}_{model.get('model', 'patchtst')}_{model.get('attention', 'softmax')}{horizon}"
            f"_s{config.get('seed_everything')}")
    series = (model.get("model_kwargs") or {}).get("series_layers")
    name = name if series is None else f"{name}_series{series}"          # IrregularTransformer's series sequence
    name = name if data.get("split_seed") is None else f"{name}_split{data['split_seed']}"
    name = name if switch_epoch is None else f"{name}_switch{switch_epoch}"
    name = name if ema is None else f"{name}_ema{ema:g}"
    average = next((c for c in (config.get("trainer") or {}).get("callbacks") or [] if _is(c, "BestEpochsAverage")), None)
    return name if average is None else f"{name}_avg{(average.get('init_args') or {}).get('k', 3)}"


def add_run_plumbing(config: dict[str, Any], root: pathlib.Path, *, resumable: bool = False) -> dict[str, Any]:
    """Place the run in ``root`` and add what the record needs (see the module docstring); ``resumable``:
    the ``val_mse`` checkpoints go to ``root/checkpoints`` with a ``last.ckpt`` after every epoch."""
    trainer = config.setdefault("trainer", {})
    trainer["default_root_dir"] = str(root)
    if trainer.get("logger") is None or trainer.get("logger") is True:
        trainer["logger"] = {"class_path": "lightning.pytorch.loggers.CSVLogger",
                             "init_args": {"save_dir": str(root), "name": "logs"}}
    trainer.setdefault("enable_progress_bar", False)
    callbacks = trainer.setdefault("callbacks", [])
    if not any(_is(c, "ModelCheckpoint") for c in callbacks):
        callbacks.append({"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                          "init_args": {"monitor": "val_mse", "mode": "min", "save_top_k": 1}})
    if resumable:
        # one fixed folder, so that a resumed run's checkpoint callback restores its best score (Lightning
        # keeps it only when the folder is the same)
        for c in callbacks:
            if _is(c, "ModelCheckpoint") and c.get("init_args", {}).get("monitor") == "val_mse":
                c["init_args"].update(dirpath=str(root / "checkpoints"))
        # last.ckpt after every epoch, improved or not: a checkpoint without a monitor keeps the latest state
        # (``save_last=True`` on the val_mse checkpoint writes it only at an epoch that improved, and a
        # resumed run would repeat every epoch since). Listed after the val_mse one, so that the state it
        # saves holds that epoch's best score and path.
        callbacks.append({"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                          "init_args": {"dirpath": str(root / "checkpoints"), "filename": "last", "monitor": None,
                                        "save_top_k": 1, "enable_version_counter": False}})
    callbacks.append({"class_path": "tsattn.lightning.EpochTimer"})
    return config


def validation_curve(run_dir: pathlib.Path, metric: str = "val_mse") -> list[float]:
    """The run's ``metric`` after each epoch, from its CSV logs (``logs/version_*/metrics.csv``; a
    resumed run's later versions overwrite the epochs they repeat)."""
    by_epoch: dict[int, float] = {}
    versions = sorted((run_dir / "logs").glob("version_*"), key=lambda d: int(d.name.split("_")[-1]))
    for version in versions:
        path = version / "metrics.csv"
        if not path.is_file():
            continue
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                if row.get(metric) and row.get("epoch"):
                    by_epoch[int(float(row["epoch"]))] = float(row[metric])
    return [by_epoch[e] for e in sorted(by_epoch)]


def main(argv: Optional[Sequence[str]] = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=pathlib.Path)
    parser.add_argument("--dataset", default="ETTh1")
    parser.add_argument("--attention", choices=["softmax", "continuous"])
    parser.add_argument("--horizon", type=int, default=96)
    parser.add_argument("--epochs", type=int, help="override trainer.max_epochs")
    parser.add_argument("--patience", type=int, help="override the early-stopping patience (adds early stopping)")
    parser.add_argument("--seed", type=int, help="override every seed of the config")
    parser.add_argument("--sink", choices=["zeros", "first", "learned"])
    parser.add_argument("--rope", action="store_true", help="turn RoPE on")
    parser.add_argument("--switch-epoch", type=int, help="train softmax, switch to continuous at this epoch")
    parser.add_argument("--ema", type=float, metavar="DECAY",
                        help="keep an exponential moving average of the weights (Lightning's EMAWeightAveraging, "
                             "updated every step); validation, checkpoints and the test read the average")
    parser.add_argument("--average-best", type=int, metavar="K",
                        help="test the mean of the weights of the K best validation epochs (BestEpochsAverage)")
    parser.add_argument("--keep-checkpoints", action="store_true",
                        help="keep every epoch's val_mse checkpoint (epoch=E-val_mse=V.ckpt), not only the best")
    parser.add_argument("--model-kwargs", type=json.loads, default={}, help='JSON, e.g. \'{"head_dropout": 0}\'')
    parser.add_argument("--accelerator", help="override trainer.accelerator (default: the config's)")
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override any config entry, e.g. --set model.lr=0.0003 --set data.init_args.max_series=300")
    parser.add_argument("--no-test", action="store_true",
                        help="do not test (a hyperparameter search on validation: the test split is never read)")
    parser.add_argument("--resume", action="store_true",
                        help="continue from runs/<name>/checkpoints/last.ckpt when a run with these arguments "
                             "was interrupted (and write one after every epoch); starts afresh when there is none")
    parser.add_argument("--tag", default="", help="free text stored with the result")
    parser.add_argument("--runs-dir", type=pathlib.Path, default=ROOT / "runs", help="runs go to <runs-dir>/<name>/")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "benchmarks" / "results" / "runs.jsonl")
    args = parser.parse_args(argv)
    commit = git_commit()  # the code this run imports; HEAD may move while it trains
    if args.threads:
        torch.set_num_threads(args.threads)

    path = args.config or ROOT / "configs" / args.dataset / f"patchtst_{args.attention or 'softmax'}_{args.horizon}.yaml"
    config = apply_overrides(yaml.safe_load(path.read_text()), args)
    for assignment in args.set:
        set_option(config, assignment)
    name = run_name(config, args.switch_epoch, args.ema)
    run_dir = args.runs_dir / name
    settings = run_settings(config, args.switch_epoch, args.ema)
    if args.resume:
        check_same_settings(run_dir, settings)
    config = add_run_plumbing(config, run_dir, resumable=args.resume)
    last = run_dir / "checkpoints" / "last.ckpt"
    resume_from = last if args.resume and last.is_file() else None
    finished = run_dir / "record.json"
    if args.resume and finished.is_file():
        record = json.loads(finished.read_text())
        print(f"{name}: finished before (runs nothing; its record is in {args.out} and {finished})")
        print(json.dumps(record, indent=1))
        return record
    resumed_at = None
    if resume_from is not None:
        state = torch.load(resume_from, weights_only=False, map_location="cpu")
        resumed_at = int(state["epoch"]) + 1
        relocate_checkpoint_paths(resume_from, state)
        del state

    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "settings.json").write_text(json.dumps(settings, indent=1) + "\n")
    cli = build_cli(config, run=False)  # what `tsattn fit --config` builds
    trainer, module, dm = cli.trainer, cli.model, cli.datamodule
    timer = next(c for c in trainer.callbacks if isinstance(c, EpochTimer))
    checkpoints = [c for c in trainer.callbacks if isinstance(c, ModelCheckpoint)]
    checkpoint = next((c for c in checkpoints if c.monitor == "val_mse"), checkpoints[0])
    stop = next((c for c in trainer.callbacks if isinstance(c, EarlyStopping)), None)
    start = time.perf_counter()
    trainer.fit(module, datamodule=dm, ckpt_path=None if resume_from is None else str(resume_from))
    fit_seconds = time.perf_counter() - start
    best = checkpoint.best_model_path or checkpoint.last_model_path
    average = next((c for c in trainer.callbacks if isinstance(c, BestEpochsAverage)), None)
    averaged = {}
    if average is not None:  # the module holds the mean of the best epochs' weights: validate and test it
        averaged = {"average_best": average.k, "averaged_epochs": [e + 1 for e in average.averaged_epochs],
                    "averaged_val_mse": float(trainer.validate(module, datamodule=dm, verbose=False)[0]["val_mse"])}
    # a search on validation (--no-test) never reads the test split
    test = {} if args.no_test else trainer.test(module, datamodule=dm, ckpt_path=None if average else best,
                                                verbose=False)[0]
    best_epoch = int(torch.load(best, weights_only=True, map_location="cpu")["epoch"])
    hp = module.hparams
    record = {
        "name": name, "dataset": data_arguments(config).get("data"), "model": hp.model,
        "attention": hp.attention, "sink": hp.sink, "rope": hp.rope,
        "switch_epoch": args.switch_epoch, "ema": args.ema, "horizon": hp.horizon, "lookback": hp.lookback,
        "seed": config.get("seed_everything"), "split_seed": data_arguments(config).get("split_seed"),
        "epochs_run": trainer.current_epoch, "best_epoch": best_epoch + 1, "max_epochs": trainer.max_epochs,
        "train_steps": trainer.global_step, "patience": None if stop is None else stop.patience,
        "best_val_mse": None if checkpoint.best_model_score is None else float(checkpoint.best_model_score),
        **averaged,
        **{k: float(v) for k, v in test.items()},
        "seconds_per_epoch_median": sorted(timer.seconds)[len(timer.seconds) // 2] if timer.seconds else None,
        "fit_seconds": fit_seconds, "resumed_at_epoch": resumed_at,
        "val_mse_curve": validation_curve(run_dir),
        "config": str(path.resolve().relative_to(ROOT)) if path.resolve().is_relative_to(ROOT) else str(path),
        "model_kwargs": hp.model_kwargs, "lr": hp.lr, "overrides": args.set, "command": " ".join(sys.argv if argv is None else ["run_protocol.py", *argv]),
        "commit": commit, "torch": torch.__version__, "threads": torch.get_num_threads(),
        "accelerator": type(trainer.accelerator).__name__, "machine": platform.machine(),
        "date": time.strftime("%Y-%m-%d %H:%M"), "tag": args.tag,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "a") as fh:
        fh.write(json.dumps(record) + "\n")
    if args.resume:
        finished.write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record, indent=1))
    return record


if __name__ == "__main__":
    os.environ.setdefault("MPLCONFIGDIR", "/tmp/tsattn-mpl")
    main()
