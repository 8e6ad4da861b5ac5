"""t-PatchGNN's own code on tsattn's PhysioNet 2012 split: prepare, run several seeds at once, summarize.

    TSATTN_DATA_DIR=../shared/data python benchmarks/peer_tpatchgnn.py run --peer ../peers/t-PatchGNN \\
        --work /tmp/tpg --seeds 1 2 3 [--seconds 540] [--detach] [--state DIR] [--resume]
    python benchmarks/peer_tpatchgnn.py summarize /tmp/tpg/peer_s1.log ... --out benchmarks/results/X.jsonl

The peer (repository usail-hkust/t-PatchGNN, commit 00c94e7; fetch it, it is not part of tsattn) is run
with its ``run_all.sh`` PhysioNet settings and these changes, made to a copy under ``--work`` (the checkout
is only read): its records are sorted by RecordID just before its two ``train_test_split`` calls, which
makes its split exactly tsattn's (``tsattn.data.observations.samples.split_series``: its printed test ids
are our test split); its epoch loop saves its state after every epoch (weights, optimizer, best validation
so far and the test there, and the random states of torch, CUDA, numpy and Python) and starts from that
state when there is one (the peer itself has no resume); and, without CUDA, the two ``.cuda()`` calls of
its model are dropped. Its archives
are the registered dataset's (``tsattn.data.registry.resolve("physionet2012")``: ``TSATTN_DATA_DIR`` or the
cache, checksums checked) and are parsed by its own
``PhysioNet.download()``, one process per set. ``reformer_pytorch`` (imported, unused for PhysioNet) and,
where missing, ``torchvision.datasets.utils.download_url`` get stand-ins. Each seed trains in its own
copy (its log file is per copy), all at once; ``--seconds`` stops every run after that long, ``--detach``
starts them in their own process sessions and returns at once (a run then outlives the command that
started it). Each run's output goes to ``STATE/peer_s<seed>.log`` and its state after its last finished
epoch to ``STATE/peer_s<seed>.pt`` (``--state``, default ``--work``). ``--resume`` continues each seed from
that state, where there is one, appending to its log (a run stopped by ``--seconds`` or by a lent machine's
time limit goes on in a later session, on the same or another machine); the random states come back with
it, so the batches are those of an uninterrupted run (on a GPU the peer's sums are not bit-for-bit
repeatable anyway). A seed whose early stopping ended it runs nothing.

``summarize`` reads those logs into one JSON line per seed: validation MSE/MAE after every epoch (epochs
counted from 1), the seconds of each, the best validation epoch so far and the test MSE/MAE the peer
measured there, whether its early stopping ended the run, and the epochs it was resumed at.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

SETTINGS = ["--dataset", "physionet", "--state", "def", "--history", "24", "--patience", "10", "--batch_size", "32",
            "--lr", "1e-3", "--patch_size", "8", "--stride", "8", "--nhead", "1", "--tf_layer", "1", "--nlayer", "1",
            "--te_dim", "10", "--node_dim", "10", "--hid_dim", "64", "--outlayer", "Linear"]   # run_all.sh, PhysioNet
SPLIT_COMMENT = "\t\t# Shuffle and split\n"
SPLIT_ANCHOR = SPLIT_COMMENT + "\t\tseen_data, test_data = model_selection.train_test_split(total_dataset"
SORT_LINE = "\t\ttotal_dataset.data.sort(key=lambda r: int(r[0]))  # RecordID order: tsattn's split\n"
SETS = ("set-a", "set-b", "set-c")
LOOP = "\tfor itr in range(args.epoch):\n"
STOP_CHECK = "\t\tif(itr - best_iter >= args.patience):\n\t\t\tprint(\"Exp has been early stopped!\")\n\t\t\tsys.exit(0)\n"
STATE_ENV = "TSATTN_PEER_STATE"
RESUME_LOAD = f"""\t# tsattn: continue from the state saved after an epoch, when there is one
\tstart_itr, state_file = 0, os.environ.get("{STATE_ENV}")
\tif state_file and os.path.exists(state_file):
\t\tstate = torch.load(state_file, map_location=args.device, weights_only=False)
\t\tmodel.load_state_dict(state["model"])
\t\toptimizer.load_state_dict(state["optimizer"])
\t\tbest_val_mse, best_iter, test_res, start_itr = state["best_val_mse"], state["best_iter"], state["test_res"], state["epoch"]
\t\ttorch.set_rng_state(state["rng_torch"])
\t\tif state["rng_cuda"] is not None and torch.cuda.is_available():
\t\t\ttorch.cuda.set_rng_state_all(state["rng_cuda"])
\t\tnp.random.set_state(state["rng_numpy"])
\t\trandom.setstate(state["rng_python"])
\t\tlogger.info("Resumed at epoch {{:03d}}".format(start_itr))
\tfor itr in range(start_itr, args.epoch):
"""
RESUME_SAVE = """\t\tif state_file:  # tsattn: the state after this epoch (weights, optimizer, best so far, random states)
\t\t\ttorch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": itr + 1,
\t\t\t            "best_val_mse": best_val_mse, "best_iter": best_iter, "test_res": test_res,
\t\t\t            "rng_torch": torch.get_rng_state(),
\t\t\t            "rng_cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
\t\t\t            "rng_numpy": np.random.get_state(), "rng_python": random.getstate()}, state_file + ".tmp")
\t\t\tos.replace(state_file + ".tmp", state_file)
"""

PARSE_ONE = """import os, sys
sys.path.insert(0, os.getcwd())
from lib.physionet import PhysioNet
i, root = int(sys.argv[1]), sys.argv[2]
PhysioNet.urls = [PhysioNet.urls[i]]
p = PhysioNet.__new__(PhysioNet)
p.root, p.reduce, p.quantization = root, "average", 0.0
p.download()
"""
DOWNLOAD_STUB = """import os
def download_url(url, root, filename=None, md5=None):
    if not os.path.exists(os.path.join(root, filename)):
        raise FileNotFoundError(os.path.join(root, filename))
"""


def prepare(peer: Path, work: Path, cuda: bool) -> Path:
    """Copy the peer's ``lib`` and ``tPatchGNN`` to ``work/code`` with the RecordID sort, the state saved after
    every epoch and read back at the start (when ``$TSATTN_PEER_STATE`` names a file) and, without CUDA,
    without its ``.cuda()`` calls; return that folder. The checkout itself is not changed."""
    for part in ("lib/parse_datasets.py", "tPatchGNN/run_models.py", "tPatchGNN/model/tPatchGNN.py"):
        if not (peer / part).is_file():
            raise SystemExit(f"{peer} is not a t-PatchGNN checkout ({part} is missing): pass --peer the folder "
                             "of usail-hkust/t-PatchGNN")
    code = work / "code"
    if code.exists():
        shutil.rmtree(code)
    for part in ("lib", "tPatchGNN"):
        shutil.copytree(peer / part, code / part, ignore=shutil.ignore_patterns("__pycache__", "logs", "experiments"))
    parse = code / "lib" / "parse_datasets.py"
    text = parse.read_text()
    if SPLIT_ANCHOR not in text:
        raise SystemExit(f"{parse}: the split this script sorts before was not found (another version of the "
                         "peer?); this script knows commit 00c94e7")
    at = text.index(SPLIT_ANCHOR) + len(SPLIT_COMMENT)               # the first: PhysioNet and MIMIC
    parse.write_text(text[:at] + SORT_LINE + text[at:])
    runner = code / "tPatchGNN" / "run_models.py"
    text = runner.read_text()
    if text.count(LOOP) != 1 or text.count(STOP_CHECK) != 1 or text.index(LOOP) > text.index(STOP_CHECK):
        raise SystemExit(f"{runner}: its epoch loop (or the early stop that ends it) was not found as expected "
                         "(another version of the peer?); this script knows commit 00c94e7")
    text = text.replace(LOOP, RESUME_LOAD).replace(STOP_CHECK, STOP_CHECK + RESUME_SAVE)
    runner.write_text(text)
    if not cuda:
        model = code / "tPatchGNN" / "model" / "tPatchGNN.py"
        model.write_text(model.read_text().replace(".cuda()", ""))
    return code


def _stubs(work: Path) -> Path:
    stubs = work / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    (stubs / "reformer_pytorch.py").write_text("LSHSelfAttention = None  # imported by the peer, unused for PhysioNet\n")
    if subprocess.run([sys.executable, "-c", "import torchvision.datasets.utils"], capture_output=True).returncode:
        (stubs / "torchvision" / "datasets").mkdir(parents=True, exist_ok=True)
        (stubs / "torchvision" / "__init__.py").write_text("")
        (stubs / "torchvision" / "datasets" / "__init__.py").write_text("")
        (stubs / "torchvision" / "datasets" / "utils.py").write_text(DOWNLOAD_STUB)
    return stubs


def run(args: argparse.Namespace) -> None:
    import torch

    from tsattn.data.registry import resolve

    work = args.work.resolve()
    cuda = torch.cuda.is_available()
    code = prepare(args.peer.resolve(), work, cuda)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(_stubs(work)), os.environ.get("PYTHONPATH")])),
               PYTHONUNBUFFERED="1", OMP_NUM_THREADS=str(args.threads))
    root = work / "data" / "physionet"
    (root / "raw").mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    parsers = []
    archives = {path.name.removesuffix(".tar.gz"): path for path in resolve("physionet2012")}
    for i, name in enumerate(SETS):                          # the order of the peer's PhysioNet.urls
        shutil.copyfile(archives[name], root / "raw" / f"{name}.tar.gz?download")   # where its download() looks
        if not (root / "processed" / f"{name}_0.0.pt").exists():
            parsers.append(subprocess.Popen([sys.executable, "-c", PARSE_ONE, str(i), str(root)], cwd=code, env=env))
    if any(p.wait() for p in parsers):
        raise SystemExit("parsing the PhysioNet archives with the peer's own code failed (its output is above)")
    print(f"parsed in {time.monotonic() - start:.0f} s; device: {'cuda' if cuda else 'cpu'}", flush=True)
    state = (args.state or work).resolve()
    state.mkdir(parents=True, exist_ok=True)
    runs, seeds = [], []
    for seed in args.seeds:
        files = seed_files(state, seed, args.resume)
        if files is None:
            print(f"seed {seed}: stopped early before (its log: {state / f'peer_s{seed}.log'}); runs nothing")
            continue
        log_path, saved, mode = files
        copy = work / f"s{seed}"
        if copy.exists():
            shutil.rmtree(copy)
        shutil.copytree(code, copy)
        (copy / "data").symlink_to(work / "data")          # its code reads ../data/physionet from tPatchGNN/
        argv = [sys.executable, "run_models.py", *SETTINGS, "--seed", str(seed), "--gpu", "0"]
        if args.seconds:
            argv = ["timeout", str(int(args.seconds)), *argv]
        with open(log_path, mode) as log:                   # the run keeps its own descriptor
            runs.append(subprocess.Popen(argv, cwd=copy / "tPatchGNN", env=dict(env, **{STATE_ENV: str(saved)}),
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=args.detach))
        seeds.append(seed)
    if args.detach:
        print(f"started seeds {seeds} (pids {[p.pid for p in runs]}); logs and states in {state}")
        return
    codes = [p.wait() for p in runs]
    print(f"seeds {seeds} ended with {codes} after {time.monotonic() - start:.0f} s; logs and states in {state}")


def seed_files(state: Path, seed: int, resume: bool) -> Optional[tuple[Path, Path, str]]:
    """A seed's log, its saved state and how to open the log: a fresh run (no ``resume``, or nothing saved yet)
    removes an old state and starts the log over; a resumed one appends to the log. None: with ``resume``,
    a run whose log says its early stopping ended it (nothing left to run)."""
    log, saved = state / f"peer_s{seed}.log", state / f"peer_s{seed}.pt"
    if resume and log.is_file() and STOPPED in log.read_text():
        return None
    if resume and saved.is_file():
        return log, saved, "a"
    saved.unlink(missing_ok=True)
    return log, saved, "w"


EPOCH = re.compile(r"- Epoch (\d+), ExpID")
RESUMED = re.compile(r"Resumed at epoch (\d+)")
STOPPED = "Exp has been early stopped"
VAL = re.compile(r"Val - Loss, MSE, RMSE, MAE, MAPE: [\d.]+, ([\d.]+), [\d.]+, ([\d.]+)")
TEST = re.compile(r"Test - Best epoch, Loss, MSE, RMSE, MAE, MAPE: (\d+), [\d.]+, ([\d.]+), [\d.]+, ([\d.]+)")
SECONDS = re.compile(r"Time spent: ([\d.]+)s")
SEED = re.compile(r"--seed (\d+)")


def summarize_log(text: str) -> dict:
    """One record from a peer log: the curves, the best validation epoch so far and the test there. A log
    that goes on after a ``Resumed at epoch N`` line (``run --resume``) keeps its first N epochs (those the
    saved state holds) and reads the rest from there."""
    pieces = RESUMED.split(text)                             # [run, N, continued run, N', ...]
    epochs: list[tuple] = []                                 # (val MSE, val MAE, seconds, test or None)
    for i in range(0, len(pieces), 2):
        if i:
            resumed_at = int(pieces[i - 1])
            if resumed_at > len(epochs):
                raise ValueError(f"resumed at epoch {resumed_at} after {len(epochs)} epochs: not one run's log")
            del epochs[resumed_at:]                          # epochs logged after the last saved state
        parts = EPOCH.split(pieces[i])
        for number, body in zip(parts[1::2], parts[2::2]):
            v, s, t = VAL.search(body), SECONDS.search(body), TEST.search(body)
            if v is None or s is None:
                break                                        # an epoch cut off mid-report
            if int(number) != len(epochs):
                raise ValueError(f"epoch {number} follows {len(epochs)} epochs: not one run's log")
            test = None if t is None else (int(t.group(1)) + 1, float(t.group(2)), float(t.group(3)))
            epochs.append((float(v.group(1)), float(v.group(2)), float(s.group(1)), test))
    if not epochs:
        raise ValueError("no finished epoch in this log")
    val = [e[0] for e in epochs]
    best = min(range(len(val)), key=val.__getitem__)
    test = next((e[3] for e in reversed(epochs) if e[3] is not None), None)
    if test is None or test[0] != best + 1:
        raise ValueError("the log's last test line is not at its best validation epoch")
    seed = SEED.search(text)
    return {"seed": int(seed.group(1)) if seed else None, "epochs_run": len(val),
            "early_stopped": STOPPED in text, "best_epoch": best + 1,
            "best_val_mse": val[best], "test_mse": test[1], "test_mae": test[2],
            "val_mse_curve": val, "val_mae_curve": [e[1] for e in epochs], "seconds_per_epoch": [e[2] for e in epochs],
            "resumed_at_epochs": [int(n) for n in pieces[1::2]]}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="prepare a copy of the peer and train seeds at once")
    r.add_argument("--peer", type=Path, required=True, help="a checkout of usail-hkust/t-PatchGNN (only read)")
    r.add_argument("--work", type=Path, required=True, help="where the copies, parsed data and logs go")
    r.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    r.add_argument("--seconds", type=float, default=0, help="stop every run after this long (0: no limit)")
    r.add_argument("--threads", type=int, default=2, help="OMP_NUM_THREADS of each run")
    r.add_argument("--detach", action="store_true", help="start the runs in their own sessions and return")
    r.add_argument("--state", type=Path, help="where each seed's log (peer_s<seed>.log) and its state after the "
                   "last finished epoch (peer_s<seed>.pt) go (default: --work)")
    r.add_argument("--resume", action="store_true", help="continue each seed from its state in --state (appending "
                   "to its log) where there is one; a seed whose early stopping ended it runs nothing")
    s = sub.add_parser("summarize", help="one JSON line per peer log")
    s.add_argument("logs", type=Path, nargs="+")
    s.add_argument("--out", type=Path, help="append the lines here (default: print them)")
    s.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a field added to every line (e.g. device=H200)")
    args = parser.parse_args(argv)
    if args.command == "run":
        run(args)
        return
    extra = dict(item.split("=", 1) for item in args.set)
    records = [summarize_log(log.read_text()) for log in args.logs]
    lines = [json.dumps({"name": f"tpatchgnn_physionet_s{r['seed']}", **r, **extra}) for r in records]
    if args.out:
        with args.out.open("a") as f:
            f.write("".join(line + "\n" for line in lines))
    else:
        print("\n".join(lines))


if __name__ == "__main__":
    main()
