"""Models never see the future: not the targets after the window, and, for the causal decoder,
not the rows after a token (per-position test, every attention x sink x RoPE, with real times)."""
import itertools

import pytest
import torch

from tsattn.models import MODELS, PatchDecoder, model_task
from tsattn.nn import ATTENTIONS, SINKS, MultiHeadAttention

WINDOW_MODELS = sorted(n for n in MODELS if model_task(n) == "window")  # window in, forecast out

C, L, H, P = 2, 44, 10, 8          # L % P = 4: the decoder drops the 4 oldest rows


def small(name, **kw):
    torch.manual_seed(0)
    sizes = dict(n_layers=2, n_heads=2, d_model=8, d_ff=16, patch_len=P)
    if name == "patchtst":
        sizes["stride"] = 4
    model = MODELS[name](C, L, H, **sizes, **kw)
    for m in model.modules():
        if isinstance(m, MultiHeadAttention) and m.sink.kind == "learned":
            with torch.no_grad():
                m.sink.k0.normal_()
                m.sink.v0.normal_()
    return model.eval()


def times(batch, length, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.cat([torch.zeros(batch, 1), (torch.rand(batch, length - 1, generator=g) + 0.5).cumsum(1)], 1)


@pytest.mark.parametrize("name,attention", list(itertools.product(WINDOW_MODELS, ATTENTIONS)))
def test_forecast_unchanged_when_targets_after_the_window_change(name, attention):
    model = small(name, attention=attention, sink="learned", rope=True)
    series = torch.randn(3, L + H, C)
    t = times(3, L + H)
    forecast = model(series[:, :L], t[:, :L])
    perturbed = series.clone()
    perturbed[:, L:] += 100.0 * torch.randn(3, H, C)            # the targets y
    # exact: the model reads the same bits through the same code (the test is that it reads nothing else)
    torch.testing.assert_close(model(perturbed[:, :L], t[:, :L]), forecast, rtol=0, atol=0)


@pytest.mark.parametrize(
    "attention,sink,rope,irregular", list(itertools.product(ATTENTIONS, SINKS, [False, True], [False, True]))
)
def test_decoder_token_i_never_sees_rows_after_patch_i(attention, sink, rope, irregular):
    model = small("decoder", attention=attention, sink=sink, rope=rope)
    n, first = model.n_tokens, model.first_row
    x = torch.randn(2, L, C)
    t_x = times(2, L) if irregular else None
    base = model.forward_tokens(x, t_x)                          # [B, n, H, C]
    assert base.shape == (2, n, H, C)
    torch.testing.assert_close(model(x, t_x), base[:, -1])
    for i in range(n - 1):
        end = first + (i + 1) * P                                # rows < end are token i's past
        x2 = x.clone()
        x2[:, end:] = 5.0 * torch.randn(2, L - end, C)           # new values, new level and scale
        t2 = None
        if irregular:
            t2 = t_x.clone()
            t2[:, end:] += 2.0                                   # a gap: later times move
        out = model.forward_tokens(x2, t2)
        torch.testing.assert_close(out[:, : i + 1], base[:, : i + 1], rtol=0, atol=1e-5)
        assert not torch.allclose(out[:, i + 1:], base[:, i + 1:], atol=1e-3)   # the test can fail


def test_decoder_rows_before_the_kept_patches_are_unused():
    model = small("decoder")
    x = torch.randn(2, L, C)
    x2 = x.clone()
    x2[:, : model.first_row] = 50.0
    # exact: the kept rows are the same bits, read by the same code; the dropped ones must not matter at all
    torch.testing.assert_close(model(x2), model(x), rtol=0, atol=0)


def test_decoder_token_targets_are_the_rows_after_each_patch():
    model: PatchDecoder = small("decoder")
    series = torch.arange(float(L + H))[None, :, None].expand(2, L + H, C)
    targets = model.token_targets(series[:, :L], series[:, L:])
    assert targets.shape == (2, model.n_tokens, H, C)
    for i in range(model.n_tokens):
        start = model.first_row + (i + 1) * P
        torch.testing.assert_close(targets[:, i], series[:, start: start + H])
    with pytest.raises(ValueError):
        model.token_targets(series[:, :L], series[:, L: L + H - 1])
