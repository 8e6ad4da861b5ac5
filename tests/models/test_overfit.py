"""Both models with both attentions fit a small sine-wave task: the loss falls by more than 10x."""
import pytest
import torch

from tsattn.models import PatchDecoder, PatchTST

L, H, C = 64, 16, 1
STEPS = 150


def sine_batch(batch=32, seed=0):
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(L + H, dtype=torch.float32)
    period = 12.0 + 8.0 * torch.rand(batch, 1, generator=g)
    phase = 6.283 * torch.rand(batch, 1, generator=g)
    amp = 1.0 + torch.rand(batch, 1, generator=g)
    level = torch.randn(batch, 1, generator=g)
    series = (level + amp * torch.sin(6.283 * t / period + phase)).unsqueeze(-1)   # [B, L+H, 1]
    return series[:, :L], series[:, L:]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["patchtst", "decoder"])
@pytest.mark.parametrize("attention", ["softmax", "continuous"])
def test_overfits_a_sine_batch(name, attention):
    torch.manual_seed(0)
    if name == "patchtst":
        model = PatchTST(C, L, H, attention=attention, sink="learned", rope=True, patch_len=8, stride=4,
                         n_layers=2, n_heads=2, d_model=16, d_ff=32, dropout=0.0)
    else:
        model = PatchDecoder(C, L, H, attention=attention, sink="learned", rope=True, patch_len=8,
                             n_layers=2, n_heads=2, d_model=32, d_ff=64, dropout=0.0)
    x, y = sine_batch()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)

    def loss_fn():
        if name == "decoder":                      # every position's next H rows
            return (model.forward_tokens(x) - model.token_targets(x, y)).square().mean()
        return (model(x) - y).square().mean()

    with torch.no_grad():
        model.eval()
        first = (model(x) - y).square().mean().item()
    model.train()
    for _ in range(STEPS):
        opt.zero_grad()
        loss_fn().backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        last = (model(x) - y).square().mean().item()
    assert last < first / 10, (first, last)
