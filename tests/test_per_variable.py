"""benchmarks/per_variable.py: the per-variable table on the protocol's scale."""
import numpy as np
import pandas as pd
import pytest


@pytest.fixture(scope="module")
def per_variable(benchmark_script):
    return benchmark_script("per_variable")


def test_errors_per_variable_on_the_fit_scale(per_variable):
    frame = pd.DataFrame({"name": ["a", "a", "b"], "forecast": [1.0, 2.0, 10.0], "observed": [0.0, 0.0, 0.0]})
    out = per_variable.per_variable(frame, pd.Series({"a": 2.0, "b": 10.0}), "name")
    assert out.loc["a", "targets"] == 2 and out.loc["b", "targets"] == 1
    np.testing.assert_allclose(out.loc["a", "mse"], ((1 / 2) ** 2 + (2 / 2) ** 2) / 2)   # scaled by the fit's scale
    np.testing.assert_allclose(out.loc["b", "mse"], 1.0)
    np.testing.assert_allclose(out["mae_units"], [1.5, 10.0])
