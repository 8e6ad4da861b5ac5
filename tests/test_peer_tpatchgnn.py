"""benchmarks/peer_tpatchgnn.py: the peer's copy sorted onto tsattn's split, and its logs read back."""
import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn import model_selection

from tsattn.data.observations.samples import split_series


@pytest.fixture(scope="module")
def peer(benchmark_script):
    return benchmark_script("peer_tpatchgnn")


SPLIT = ("\t\t# Shuffle and split\n"
         "\t\tseen_data, test_data = model_selection.train_test_split(total_dataset, train_size= 0.8, "
         "random_state = 42, shuffle = True)\n")


RUN_MODELS = """import os, sys, random, logging
import numpy as np
import torch
from torch.utils.data import DataLoader

logging.basicConfig(level=logging.INFO, format="%(message)s")
logger = logging.getLogger("peer")


class args:
	epoch, patience, device = int(os.environ.get("FAKE_EPOCHS", 6)), 2, torch.device("cpu")


def inf_generator(iterable):
	iterator = iterable.__iter__()
	while True:
		try:
			yield iterator.__next__()
		except StopIteration:
			iterator = iterable.__iter__()


if __name__ == '__main__':
	torch.manual_seed(0); np.random.seed(0); random.seed(0)
	x = torch.randn(40, 3); y = x.sum(1, keepdim=True) + 0.3 * torch.randn(40, 1)
	train = inf_generator(DataLoader(list(zip(x, y)), batch_size=8, shuffle=True))
	val = inf_generator(DataLoader(list(zip(x, y)), batch_size=16, shuffle=False))
	model = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
	optimizer = torch.optim.Adam(model.parameters(), lr=3e-2)
	best_val_mse = np.inf
	test_res = None
	for itr in range(args.epoch):
		if itr == int(os.environ.get("FAKE_KILL_AT", -1)):
			os._exit(3)
		model.train()
		for _ in range(5):
			optimizer.zero_grad()
			xb, yb = next(train)
			scale = 1 + 0.1 * float(np.random.rand()) + 0.1 * random.random()
			(scale * ((model(xb) - yb) ** 2).mean()).backward()
			optimizer.step()
		model.eval()
		with torch.no_grad():
			val_mse = sum(float(((model(xb) - yb) ** 2).sum()) for xb, yb in (next(val) for _ in range(3))) / 40
		if val_mse < best_val_mse:
			best_val_mse, best_iter, test_res = val_mse, itr, {"mse": val_mse}
		logger.info("- Epoch {:03d}: val {:.12f}, best {:03d}".format(itr, val_mse, best_iter))
		if(itr - best_iter >= args.patience):
			print("Exp has been early stopped!")
			sys.exit(0)
"""


def fake_checkout(root):
    """The three files the script reads, shaped as in the peer (two datasets' splits in parse_datasets.py)."""
    (root / "lib").mkdir(parents=True)
    (root / "tPatchGNN" / "model").mkdir(parents=True)
    (root / "lib" / "parse_datasets.py").write_text(
        "def parse_datasets(args):\n\tif physionet:\n\t\ttotal_dataset = load()\n\n" + SPLIT
        + "\telif ushcn:\n\t\ttotal_dataset = other()\n\n" + SPLIT)
    (root / "tPatchGNN" / "run_models.py").write_text(RUN_MODELS)   # the peer's loop, shaped as at 00c94e7
    (root / "tPatchGNN" / "model" / "tPatchGNN.py").write_text("a = torch.randn(3).cuda()\nb = torch.randn(2).cuda()\n")
    return root


@pytest.mark.parametrize("cuda", [False, True])
def test_prepare_sorts_before_the_first_split_only_and_leaves_the_checkout(peer, tmp_path, cuda):
    checkout = fake_checkout(tmp_path / "peer")
    before = {p: p.read_text() for p in checkout.rglob("*.py")}
    code = peer.prepare(checkout, tmp_path / "work", cuda=cuda)
    text = (code / "lib" / "parse_datasets.py").read_text()
    assert text.count(peer.SORT_LINE) == 1
    assert text.index(peer.SORT_LINE) < text.index("seen_data") < text.index("elif ushcn")
    model = (code / "tPatchGNN" / "model" / "tPatchGNN.py").read_text()
    assert (".cuda()" in model) == cuda
    assert {p: p.read_text() for p in checkout.rglob("*.py")} == before


def test_prepare_names_what_is_missing(peer, tmp_path):
    with pytest.raises(SystemExit, match="not a t-PatchGNN checkout"):
        peer.prepare(tmp_path, tmp_path / "work", cuda=False)
    checkout = fake_checkout(tmp_path / "other")
    (checkout / "lib" / "parse_datasets.py").write_text("seen, test = split(total)\n")
    with pytest.raises(SystemExit, match="split this script sorts before was not found"):
        peer.prepare(checkout, tmp_path / "work", cuda=False)
    checkout = fake_checkout(tmp_path / "third")
    (checkout / "tPatchGNN" / "run_models.py").write_text(RUN_MODELS.replace("range(args.epoch)", "range(n)"))
    with pytest.raises(SystemExit, match="epoch loop .* was not found"):
        peer.prepare(checkout, tmp_path / "work", cuda=False)


def run_peer(runner, state=None, **env):
    """The prepared fake peer as ``run`` starts it (``state``: the file its state goes to, or none): its epoch
    lines and the finished process."""
    env = {**{k: v for k, v in os.environ.items() if k != "TSATTN_PEER_STATE"}, **{k: str(v) for k, v in env.items()}}
    if state is not None:
        env["TSATTN_PEER_STATE"] = str(state)
    done = subprocess.run([sys.executable, runner.name], cwd=runner.parent, env=env, capture_output=True, text=True)
    return [line for line in done.stderr.splitlines() if line.startswith(("- Epoch", "Resumed"))], done


def test_a_run_killed_between_epochs_resumes_as_if_never_stopped(peer, tmp_path):
    """The epoch loop with the state saved and read back: killed at the start of epoch 3 and started again,
    the run goes on from epoch 3 with the weights, optimizer, best-so-far and random states of the
    uninterrupted run (shuffled batches, dropout, numpy and Python draws), so its epochs 3-5 are the same."""
    assert peer.STATE_ENV == "TSATTN_PEER_STATE"
    code = peer.prepare(fake_checkout(tmp_path / "peer"), tmp_path / "work", cuda=False)
    runner = code / "tPatchGNN" / "run_models.py"
    whole, done = run_peer(runner, tmp_path / "whole.pt")
    assert done.returncode == 0 and len(whole) == 6, done.stderr
    first, done = run_peer(runner, tmp_path / "cut.pt", FAKE_KILL_AT=3)
    assert done.returncode == 3 and first == whole[:3]
    assert torch.load(tmp_path / "cut.pt", weights_only=False)["epoch"] == 3
    rest, done = run_peer(runner, tmp_path / "cut.pt")
    assert done.returncode == 0 and rest[0] == "Resumed at epoch 003"
    assert [float(line.split()[4].rstrip(",")) for line in rest[1:]] == pytest.approx(
        [float(line.split()[4].rstrip(",")) for line in whole[3:]], rel=1e-9, abs=1e-12)
    assert [line.split()[-1] for line in rest[1:]] == [line.split()[-1] for line in whole[3:]]   # best so far
    kept = torch.load(tmp_path / "cut.pt", weights_only=False)["model"]
    for name, value in torch.load(tmp_path / "whole.pt", weights_only=False)["model"].items():
        torch.testing.assert_close(kept[name], value, rtol=1e-6, atol=1e-9)
    plain, done = run_peer(runner)                                # no state file named: the peer's own loop
    assert done.returncode == 0 and plain == whole and sorted(p.name for p in tmp_path.glob("*.pt")) == ["cut.pt", "whole.pt"]


def test_an_early_stopped_run_resumes_no_further(peer, tmp_path):
    code = peer.prepare(fake_checkout(tmp_path / "peer"), tmp_path / "work", cuda=False)
    runner = code / "tPatchGNN" / "run_models.py"
    lines, done = run_peer(runner, tmp_path / "s.pt", FAKE_EPOCHS=60)
    assert done.returncode == 0 and "Exp has been early stopped!" in done.stdout and len(lines) < 60
    state = tmp_path / "state"
    state.mkdir()
    log = state / "peer_s1.log"
    log.write_text("\n".join(lines) + "\n" + done.stdout)
    (state / "peer_s1.pt").write_bytes(b"saved")
    assert peer.seed_files(state, 1, resume=True) is None
    assert peer.seed_files(state, 1, resume=False) == (log, state / "peer_s1.pt", "w")
    assert not (state / "peer_s1.pt").exists()                  # a fresh run does not read an old state
    assert peer.seed_files(state, 2, resume=True) == (state / "peer_s2.log", state / "peer_s2.pt", "w")
    (state / "peer_s2.pt").write_bytes(b"saved")
    assert peer.seed_files(state, 2, resume=True) == (state / "peer_s2.log", state / "peer_s2.pt", "a")


def test_the_sort_makes_the_peer_split_tsattns(peer):
    """The peer's two train_test_split calls on its records after the inserted sort give tsattn's split of the
    same ids, whatever order the records were listed in."""
    ids = random.Random(0).sample(range(132000, 164000), 500)
    records = [(str(i), None, None, None) for i in ids]           # (record_id, tt, vals, mask), listed unsorted

    class Dataset:                                                # the peer's PhysioNet: .data, indexable
        data = records

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            return self.data[i]

    total_dataset = Dataset()
    exec(peer.SORT_LINE.strip(), {}, {"total_dataset": total_dataset})
    seen, test = model_selection.train_test_split(total_dataset, train_size=0.8, random_state=42, shuffle=True)
    train, val = model_selection.train_test_split(seen, train_size=0.75, random_state=42, shuffle=False)
    ours = split_series(np.array(ids), (0.6, 0.2, 0.2), seed=42)
    for name, part in (("train", train), ("val", val), ("test", test)):
        assert sorted(int(r[0]) for r in part) == sorted(np.array(ids)[ours[name]].tolist())


def epoch(n, val_mse, val_mae, seconds, test=None):
    text = (f"- Epoch {n:03d}, ExpID 42\nTrain - Loss (one batch): 0.01\n"
            f"Val - Loss, MSE, RMSE, MAE, MAPE: {val_mse:.5f}, {val_mse:.5f}, 0.07, {val_mae:.5f}, 80.00%\n")
    if test:
        text += (f"Test - Best epoch, Loss, MSE, RMSE, MAE, MAPE: {test[0]}, {test[1]:.5f}, {test[1]:.5f}, 0.07, "
                 f"{test[2]:.5f}, 70.00%\n")
    return text + f"Time spent: {seconds:.2f}s\n"


def test_summarize_reads_curves_and_the_test_at_the_best_epoch(peer, tmp_path):
    log = ("run_models.py --dataset physionet --seed 3 --gpu 0\nn_train_batches: 225\n"
           + epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049)) + epoch(1, 0.007, 0.045, 19.5, (1, 0.0066, 0.044))
           + epoch(2, 0.0075, 0.046, 16.0, (1, 0.0066, 0.044))
           + "- Epoch 003, ExpID 42\nTrain - Loss (one batch): 0.01\n")          # cut off mid-epoch
    record = peer.summarize_log(log)
    assert record["seed"] == 3 and record["epochs_run"] == 3 and not record["early_stopped"]
    assert record["val_mse_curve"] == [0.009, 0.007, 0.0075] and record["val_mae_curve"] == [0.05, 0.045, 0.046]
    assert record["best_epoch"] == 2 and record["best_val_mse"] == 0.007
    assert (record["test_mse"], record["test_mae"]) == (0.0066, 0.044)
    assert record["seconds_per_epoch"] == [20.0, 19.5, 16.0]
    assert peer.summarize_log(log + "Exp has been early stopped!\n")["early_stopped"]
    path = tmp_path / "peer_s3.log"
    path.write_text(log)
    out = tmp_path / "peer.jsonl"
    peer.main(["summarize", str(path), "--out", str(out), "--set", "device=H200"])
    line = json.loads(out.read_text())
    assert line["name"] == "tpatchgnn_physionet_s3" and line["device"] == "H200" and line["test_mse"] == 0.0066


def test_summarize_reads_a_resumed_log_from_its_saved_state(peer):
    """``run --resume`` appends to the log: the epochs logged after the last saved state (a kill between the
    report and the save) are replaced by the resumed run's."""
    first = ("run_models.py --dataset physionet --seed 2 --gpu 0\n" + epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049))
             + epoch(1, 0.007, 0.045, 19.5, (1, 0.0066, 0.044)) + epoch(2, 0.0068, 0.044, 19.0, (2, 0.0065, 0.043)))
    resumed = ("run_models.py --dataset physionet --seed 2 --gpu 0\nResumed at epoch 002\n"   # epoch 2 not saved
               + epoch(2, 0.0072, 0.046, 18.0, (1, 0.0066, 0.044)) + epoch(3, 0.0069, 0.045, 18.5, (3, 0.0064, 0.042)))
    record = peer.summarize_log(first + resumed)
    assert record["val_mse_curve"] == [0.009, 0.007, 0.0072, 0.0069] and record["seconds_per_epoch"][2:] == [18.0, 18.5]
    assert record["best_epoch"] == 4 and (record["test_mse"], record["test_mae"]) == (0.0064, 0.042)
    assert record["resumed_at_epochs"] == [2] and record["seed"] == 2
    assert peer.summarize_log(first)["resumed_at_epochs"] == []
    with pytest.raises(ValueError, match="resumed at epoch 5 after 3 epochs"):
        peer.summarize_log(first + "Resumed at epoch 005\n")


def test_summarize_refuses_logs_it_cannot_read(peer):
    with pytest.raises(ValueError, match="no finished epoch"):
        peer.summarize_log("n_train_batches: 225\n")
    with pytest.raises(ValueError, match="not at its best validation epoch"):
        peer.summarize_log(epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049)) + epoch(1, 0.007, 0.045, 19.5))
    with pytest.raises(ValueError, match="not one run's log"):
        peer.summarize_log(epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049)) + epoch(0, 0.008, 0.05, 20.0, (0, 0.008, 0.04)))
