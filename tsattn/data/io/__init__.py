"""Reading data: the table core (``table``), the regular-series reader (``series``), the observation
table reader (``observation_table``) and the readers of registered observation formats
(``readers``: ``"csv"``, ``"physionet2012"``)."""
from . import physionet  # noqa: F401  (registers the "physionet2012" reader)
from .observation_table import read_observations
from .readers import get_reader, reader_names, register_reader, unregister_reader
from .series import SeriesTable, read_series

__all__ = ["SeriesTable", "get_reader", "read_observations", "read_series", "reader_names", "register_reader",
           "unregister_reader"]
