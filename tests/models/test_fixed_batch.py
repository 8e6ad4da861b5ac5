"""Speed work must not change what the models compute: one fixed batch per model, attention, sink and RoPE
gives the loss, gradient norm and eval loss recorded at commit 592f8ab (``tests/models/fixed_batch.py``).

Tolerance: fp32 values from a few thousand-term reductions; a different thread count, instruction set or
kernel order moves them by ~1e-6 relative, a real change of the computation by far more.
"""
import json
import pathlib
import warnings

import pytest

from .fixed_batch import CASES, case_name, measure

RECORDED = json.loads((pathlib.Path(__file__).parent / "fixed_batch_losses.json").read_text())["values"]


@pytest.mark.parametrize("case", CASES, ids=[case_name(*c) for c in CASES])
def test_fixed_batch_values_unchanged(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # self.log outside a Trainer
        got = measure(*case)
    want = RECORDED[case_name(*case)]
    assert got == pytest.approx(want, rel=2e-5)
