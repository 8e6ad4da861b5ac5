"""Tiny tensors: one intra-op thread is faster than two contending ones (and under xdist, two
workers already share the two cores). Restored after each test so other folders are unaffected."""
import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
