"""tsattn.nn.Dropout: the drop rate, the scale, determinism by seed, eval mode, gradients."""
import math

import pytest
import torch

from tsattn.nn import Dropout, dropout


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_drop_rate_and_expectation(p):
    torch.manual_seed(0)
    x = torch.ones(1_000_003)                              # not a multiple of 3: the tail of the last word
    y = dropout(x, p)
    kept = (y != 0).double().mean().item()
    n = x.numel()
    assert abs(kept - (1 - p)) < 5 * math.sqrt(p * (1 - p) / n)   # 5 standard errors of a binomial
    nonzero = y[y != 0]
    p_rounded = round(p * 65536) / 65536
    torch.testing.assert_close(nonzero, torch.full_like(nonzero, 1 / (1 - p_rounded)))
    assert abs(p_rounded - p) <= 2 ** -17


def test_same_seed_same_mask_and_independent_positions():
    x = torch.ones(4, 3001)
    torch.manual_seed(5)
    a = dropout(x, 0.3)
    torch.manual_seed(5)
    b = dropout(x, 0.3)
    assert torch.equal(a, b)
    # neighbouring elements (from the same 64-bit word) are not correlated
    keep = (a != 0).double()
    corr = torch.corrcoef(torch.stack([keep[:, :-1].reshape(-1), keep[:, 1:].reshape(-1)]))[0, 1]
    assert abs(corr.item()) < 0.03


def test_module_eval_identity_and_gradient():
    layer = Dropout(0.4)
    x = torch.randn(7, 11, requires_grad=True)
    layer.eval()
    assert layer(x) is x
    layer.train()
    torch.manual_seed(1)
    y = layer(x)
    y.sum().backward()
    scale = torch.where(y != 0, y / x, 0.0).detach()
    torch.testing.assert_close(x.grad, scale)
    assert isinstance(layer, torch.nn.Dropout)
    assert dropout(x, 0.0) is x
    assert torch.equal(dropout(x, 1.0), torch.zeros_like(x))
