"""One shared check for every registered model: signature, shapes, times, switch, determinism."""
import inspect
import itertools
import typing

import pytest
import torch

from tsattn.models import MODELS, IrregularTransformer, PatchDecoder, PatchTST, get_model_class, model_task
from tsattn.models.baselines import LastObservation, Naive, SeasonalNaive, VariableMean, WindowMean
from tsattn.models.registry import model_trainable
from tsattn.nn import ATTENTIONS, SINKS, MultiHeadAttention, set_attention

# the attention models: window in, forecast out (the reference forecasts have no attention to check)
WINDOW_MODELS = sorted(n for n in MODELS if model_task(n) == "window" and model_trainable(n))

C, L, H = 3, 48, 12
SMALL = {
    "patchtst": dict(patch_len=8, stride=4, n_layers=2, n_heads=2, d_model=8, d_ff=16),
    "decoder": dict(patch_len=8, n_layers=2, n_heads=2, d_model=8, d_ff=16),
}


def build(name, seed=0, **kw):
    torch.manual_seed(seed)
    model = MODELS[name](C, L, H, **{**SMALL[name], **kw})
    for m in model.modules():                     # move learned sinks off zero so that they matter
        if isinstance(m, MultiHeadAttention) and m.sink.kind == "learned":
            with torch.no_grad():
                m.sink.k0.normal_()
                m.sink.v0.normal_()
    return model.eval()


def irregular_times(batch=2, length=L, seed=1):
    g = torch.Generator().manual_seed(seed)
    steps = torch.rand(batch, length - 1, generator=g) * 1.5 + 0.25
    return torch.cat([torch.zeros(batch, 1), steps.cumsum(1)], dim=1)   # t_x[:, 0] == 0


def test_registry():
    assert MODELS == {"patchtst": PatchTST, "decoder": PatchDecoder, "irregular": IrregularTransformer,
                      "naive": Naive, "seasonal_naive": SeasonalNaive, "mean": WindowMean,
                      "last_observation": LastObservation, "variable_mean": VariableMean}
    assert sorted(n for n in MODELS if model_task(n) == "observations") == ["irregular", "last_observation",
                                                                             "variable_mean"]
    assert sorted(n for n in MODELS if not model_trainable(n)) == ["last_observation", "mean", "naive",
                                                                   "seasonal_naive", "variable_mean"]
    assert get_model_class("patchtst") is PatchTST
    with pytest.raises(ValueError, match="decoder.*patchtst"):
        get_model_class("transformer")


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_signature_is_typed_and_documented(name):
    cls = MODELS[name]
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    hints = typing.get_type_hints(cls.__init__)
    assert [p.name for p in params[:3]] == ["n_channels", "lookback", "horizon"]
    for p in params[3:]:
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is not inspect.Parameter.empty, p.name
    for key in ("attention", "sink", "rope", "causal"):
        assert key in hints
    doc = cls.__doc__
    for p in params:
        assert p.name in hints, f"{p.name} is not typed"
        assert f"{p.name}:" in doc, f"{p.name} is not documented"


@pytest.mark.parametrize(
    "name,attention,sink,rope", list(itertools.product(WINDOW_MODELS, ATTENTIONS, SINKS, [False, True]))
)
def test_shapes_for_every_combination(name, attention, sink, rope):
    model = build(name, attention=attention, sink=sink, rope=rope)
    x = torch.randn(2, L, C)
    for t_x in (None, irregular_times()):
        y = model(x, t_x)
        assert y.shape == (2, H, C)
        assert torch.isfinite(y).all()
    model.train()
    model(x).square().mean().backward()           # trains in every combination


@pytest.mark.parametrize(
    "name,attention,rope", list(itertools.product(WINDOW_MODELS, ATTENTIONS, [False, True]))
)
def test_times_regular_equals_default_irregular_differs(name, attention, rope):
    model = build(name, attention=attention, sink="learned", rope=rope)
    x = torch.randn(2, L, C)
    regular = torch.arange(float(L)).expand(2, L)
    torch.testing.assert_close(model(x, regular), model(x), rtol=1e-5, atol=1e-5)
    differs = not torch.allclose(model(x, irregular_times()), model(x), atol=1e-5)
    assert differs == (attention == "continuous" or rope)


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_eval_is_deterministic_and_batch_independent(name):
    model = build(name, attention="continuous", sink="first", rope=True, dropout=0.3)
    x, t_x = torch.randn(4, L, C), irregular_times(4)
    y = model(x, t_x)
    torch.testing.assert_close(model(x, t_x), y, rtol=0, atol=0)  # the same call twice: determinism is exact
    torch.testing.assert_close(model(x[:1], t_x[:1]), y[:1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_set_attention_switches_model_in_place(name):
    model = build(name, sink="learned", rope=True)
    x = torch.randn(2, L, C)
    before = [p.detach().clone() for p in model.parameters()]
    y_softmax = model(x)
    assert set_attention(model, "continuous") == 2
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    y_continuous = model(x)
    assert not torch.allclose(y_softmax, y_continuous)
    reloaded = build(name, sink="learned", rope=True, seed=5)
    reloaded.load_state_dict(model.state_dict())
    torch.testing.assert_close(reloaded(x), y_continuous)


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_revin_uses_the_window_only_shift_equivariance(name):
    """With RevIN from the lookback, adding a constant to the window adds it to the forecast."""
    model = build(name, attention="continuous", rope=True)
    x = torch.randn(2, L, C, dtype=torch.float64)
    model = model.double()
    shift = torch.tensor([10.0, -3.0, 0.5], dtype=torch.float64)
    torch.testing.assert_close(model(x + shift), model(x) + shift, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_gradients_reach_learned_sinks(name):
    model = build(name, attention="continuous", sink="learned", rope=True).train()
    model(torch.randn(2, L, C), irregular_times()).square().mean().backward()
    sinks = [m.sink for m in model.modules() if isinstance(m, MultiHeadAttention)]
    assert sinks and all(s.k0.grad.abs().sum() > 0 and s.v0.grad.abs().sum() > 0 for s in sinks)


@pytest.mark.parametrize("name", WINDOW_MODELS)
def test_input_validation(name):
    model = build(name)
    with pytest.raises(ValueError, match="shape"):
        model(torch.randn(2, L + 1, C))
    with pytest.raises(ValueError, match="shape"):
        model(torch.randn(2, L, C + 1))
    with pytest.raises(ValueError, match="t_x"):
        model(torch.randn(2, L, C), torch.zeros(2, L - 1))


def test_patchtst_paper_configuration():
    """PatchTST/42 for ETTh1: L=336 -> 42 patches (end padding), paper defaults, learned positions."""
    model = PatchTST(7, 336, 96)
    assert model.n_patches == 42
    assert (model.patch_len, model.stride, len(model.layers)) == (16, 8, 3)
    attn = model.layers[0].attn
    assert (attn.n_heads, attn.d_model, attn.attention, attn.causal, attn.softmax_sink) == (4, 16, "softmax", False, False)
    assert model.layers[0].ff.net[0].out_features == 128
    assert model.dropout.p == 0.3 and model.head_dropout.p == 0.0
    assert model.W_pos.shape == (42, 16) and model.W_pos.abs().max() <= 0.02
    assert model.head.in_features == 16 * 42 and model.revin is not None and not model.revin.affine
    assert isinstance(model.layers[0].norm_attn.norm, torch.nn.BatchNorm1d)
    assert model.token_positions(torch.arange(336.0)[None]).tolist() == [list(map(float, range(42)))]


def test_patchtst_matches_a_manual_forward():
    """The forward pass, written out step by step as in the official backbone (softmax, no RoPE)."""
    model = build("patchtst")
    x = torch.randn(2, L, C)
    mean = x.mean(1, keepdim=True)
    std = torch.sqrt(x.var(1, keepdim=True, unbiased=False) + 1e-5)
    z = ((x - mean) / std).permute(0, 2, 1)
    z = torch.nn.ReplicationPad1d((0, 4))(z).unfold(-1, 8, 4)            # [B, C, n, P]
    u = model.W_P(z).reshape(2 * C, -1, 8) + model.W_pos
    for layer in model.layers:
        a = layer.attn
        q, k, v = a.qkv(u).view(2 * C, -1, 3, 2, 4).permute(2, 0, 3, 1, 4)
        p = torch.softmax(q @ k.transpose(-1, -2) / 2.0, -1)
        o = a.out_proj((p @ v).transpose(1, 2).reshape(2 * C, -1, 8))
        u = layer.norm_attn(u + o)
        u = layer.norm_ffn(u + layer.ff(u))
    y = model.head(u.reshape(2, C, -1, 8).transpose(-1, -2).flatten(-2)).permute(0, 2, 1)
    torch.testing.assert_close(model(x), y * std + mean, rtol=1e-5, atol=1e-5)


def test_decoder_rejects_bidirectional():
    with pytest.raises(ValueError, match="causal"):
        PatchDecoder(C, L, H, causal=False)
