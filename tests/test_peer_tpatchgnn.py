"""benchmarks/peer_tpatchgnn.py: the peer's copy sorted onto tsattn's split, and its logs read back."""
import json
import random

import numpy as np
import pytest
from sklearn import model_selection

from tsattn.data.observations.samples import split_series


@pytest.fixture(scope="module")
def peer(benchmark_script):
    return benchmark_script("peer_tpatchgnn")


SPLIT = ("\t\t# Shuffle and split\n"
         "\t\tseen_data, test_data = model_selection.train_test_split(total_dataset, train_size= 0.8, "
         "random_state = 42, shuffle = True)\n")


def fake_checkout(root):
    """The three files the script reads, shaped as in the peer (two datasets' splits in parse_datasets.py)."""
    (root / "lib").mkdir(parents=True)
    (root / "tPatchGNN" / "model").mkdir(parents=True)
    (root / "lib" / "parse_datasets.py").write_text(
        "def parse_datasets(args):\n\tif physionet:\n\t\ttotal_dataset = load()\n\n" + SPLIT
        + "\telif ushcn:\n\t\ttotal_dataset = other()\n\n" + SPLIT)
    (root / "tPatchGNN" / "run_models.py").write_text("print('run')\n")
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


def test_summarize_refuses_logs_it_cannot_read(peer):
    with pytest.raises(ValueError, match="no finished epoch"):
        peer.summarize_log("n_train_batches: 225\n")
    with pytest.raises(ValueError, match="not at its best validation epoch"):
        peer.summarize_log(epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049)) + epoch(1, 0.007, 0.045, 19.5))
    with pytest.raises(ValueError, match="not one run's log"):
        peer.summarize_log(epoch(0, 0.009, 0.05, 20.0, (0, 0.0085, 0.049)) + epoch(0, 0.008, 0.05, 20.0, (0, 0.008, 0.04)))
