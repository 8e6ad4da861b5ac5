"""One fixed batch per (model, attention, sink, rope): the loss, its gradient norm and the eval loss.

``python -m tests.models.fixed_batch > tests/models/fixed_batch_losses.json`` (from the repository root)
records the values of the current code; ``test_fixed_batch.py`` checks that later code gives the same ones
within fp32 tolerance, so that speed work cannot change what the models compute.
"""
from __future__ import annotations

import itertools
import json

import torch

from tsattn.lightning import ForecastModule

C, L, H, B = 3, 96, 24, 8
MODEL_KWARGS = {
    "patchtst": dict(patch_len=16, stride=8, n_layers=2, n_heads=4, d_model=16, d_ff=32, dropout=0.0),
    "decoder": dict(patch_len=16, n_layers=2, n_heads=4, d_model=32, d_ff=64, dropout=0.0),
}
CASES = [
    (model, attention, sink, rope)
    for model, attention in itertools.product(("patchtst", "decoder"), ("softmax", "continuous"))
    for sink, rope in (("zeros", False), ("learned", True))
]


def case_name(model: str, attention: str, sink: str, rope: bool) -> str:
    return f"{model}-{attention}-{sink}-{'rope' if rope else 'norope'}"


def fixed_batch(irregular: bool) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1234)
    t = torch.arange(L + H, dtype=torch.float32)
    series = torch.sin(2 * torch.pi * t / 24)[None, :, None] + 0.3 * torch.randn(B, L + H, C, generator=g)
    t_x = None
    if irregular:
        steps = 0.25 + 1.5 * torch.rand(B, L - 1, generator=g)
        t_x = torch.cat([torch.zeros(B, 1), steps.cumsum(1)], dim=1)
    return {"x": series[:, :L], "y": series[:, L:], "t_x": t_x}


def measure(model: str, attention: str, sink: str, rope: bool) -> dict[str, float]:
    torch.manual_seed(0)
    module = ForecastModule(model, n_channels=C, lookback=L, horizon=H, attention=attention, sink=sink,
                            rope=rope, model_kwargs=MODEL_KWARGS[model])
    with torch.no_grad():                                  # learned sinks start at zero: make them matter
        for name, p in module.named_parameters():
            if name.endswith(("sink.k0", "sink.v0")):
                p.copy_(0.5 * torch.randn(p.shape, generator=torch.Generator().manual_seed(7)))
    batch = fixed_batch(irregular=rope)
    module.train()
    loss = module.training_step(batch, 0)
    loss.backward()
    grad_norm = torch.sqrt(sum(p.grad.double().square().sum() for p in module.parameters() if p.grad is not None))
    module.eval()
    with torch.no_grad():
        eval_loss = torch.nn.functional.mse_loss(module(batch), batch["y"])
    return {"loss": float(loss), "grad_norm": float(grad_norm), "eval_loss": float(eval_loss)}


if __name__ == "__main__":
    import subprocess
    import warnings

    warnings.filterwarnings("ignore")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    values = {case_name(*c): measure(*c) for c in CASES}
    print(json.dumps({"commit": commit, "values": values}, indent=1))
