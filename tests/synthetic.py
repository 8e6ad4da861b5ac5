"""Small synthetic data shared by the API tests: an hourly series with daily cycles and irregular
observation tables of two variables."""
import numpy as np
import pandas as pd

LONG = dict(id_column="patient", time_column="hours", variable_column="name", value_column="value")


def series(rows: int = 1200, seed: int = 0) -> pd.DataFrame:
    """Hourly rows of ``a`` and ``OT``, daily cycles plus noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    return pd.DataFrame({"date": pd.date_range("2022-01-01", periods=rows, freq="h"),
                         "a": 10 + 3 * np.sin(2 * np.pi * t / 24) + rng.standard_normal(rows),
                         "OT": 50 + 8 * np.cos(2 * np.pi * t / 24) + 2 * rng.standard_normal(rows)})


def observations(n_series: int = 6, hours: float = 240, seed: int = 0, resolution: float = 1.0,
                 id_format: str = "p{}") -> pd.DataFrame:
    """The long layout (``LONG``): per series, ``hr`` and ``temp`` each observed at half of the
    ``resolution``-spaced times in [0, hours), at random."""
    rng = np.random.default_rng(seed)
    slots = int(hours / resolution)
    parts = []
    for k in range(n_series):
        for name, level in (("hr", 70.0), ("temp", 37.0)):
            t = np.sort(rng.choice(slots, size=slots // 2, replace=False)) * resolution
            parts.append(pd.DataFrame({"patient": id_format.format(k), "hours": t.astype(float), "name": name,
                                       "value": level + 3 * np.sin(t / 6 + k) + rng.standard_normal(t.size)}))
    return pd.concat(parts).sort_values(["patient", "hours", "name"]).reset_index(drop=True)
