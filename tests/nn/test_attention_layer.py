"""MultiHeadAttention: shapes, the equal-score limit, sinks, positions/RoPE, causality, the switch."""
import itertools

import pytest
import torch

from tsattn.nn import ATTENTIONS, SINKS, MultiHeadAttention, knot_dt, set_attention

COMBOS = list(itertools.product(ATTENTIONS, SINKS, [False, True], [False, True]))  # attention, sink, rope, causal


def make_layer(attention="softmax", sink="zeros", rope=False, causal=False, d_model=16, n_heads=4, seed=0, **kw):
    torch.manual_seed(seed)
    layer = MultiHeadAttention(d_model, n_heads, attention=attention, sink=sink, rope=rope, causal=causal, **kw)
    if sink == "learned":  # move the sink away from its zero init so that it matters
        with torch.no_grad():
            layer.sink.k0.normal_()
            layer.sink.v0.normal_()
    return layer.eval()


def split_v(layer, x):
    """Values [B, H, N, D] exactly as the layer computes them."""
    B, N, _ = x.shape
    qkv = layer.qkv(x).view(B, N, 3, layer.n_heads, layer.head_dim).permute(2, 0, 3, 1, 4)
    return qkv[2]


def merge(layer, o):
    B, H, N, D = o.shape
    return layer.out_proj(o.transpose(1, 2).reshape(B, N, H * D))


@pytest.mark.parametrize("attention,sink,rope,causal", COMBOS)
def test_shapes_and_finite(attention, sink, rope, causal):
    layer = make_layer(attention, sink, rope, causal)
    x = torch.randn(3, 11, 16)
    positions = torch.cumsum(torch.rand(3, 11) + 0.3, dim=1)
    for pos in (None, positions):
        out = layer(x, pos)
        assert out.shape == (3, 11, 16)
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sink", ["zeros", "first"])
def test_continuous_equal_scores_is_trapezoid_average(sink, causal):
    """q = 0 makes every score equal; continuous attention then averages the piecewise-linear v(s)
    over [tau_0, tau_hi]: the trapezoid rule (knot weights 1/2, 1, ..., 1, 1/2)."""
    layer = make_layer("continuous", sink, causal=causal)
    with torch.no_grad():
        layer.qkv.weight[:16].zero_()
        layer.qkv.bias[:16].zero_()
    x = torch.randn(2, 6, 16)
    v = split_v(layer, x)                                            # [B, H, N, D]
    v0 = torch.zeros_like(v[:, :, :1]) if sink == "zeros" else v[:, :, :1]
    knots = torch.cat([v0, v], dim=2)                                # [B, H, N+1, D]
    expected = []
    for t in range(6):
        hi = t + 1 if causal else 6                                  # last knot seen by query t
        w = torch.ones(hi + 1)
        w[0] = w[hi] = 0.5
        expected.append((w[:, None] * knots[:, :, : hi + 1]).sum(2) / w.sum())
    expected = merge(layer, torch.stack(expected, dim=2))
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-5)


def test_softmax_equal_scores_is_mean_and_zero_sink_adds_no_key():
    layer = make_layer("softmax", "zeros")
    with torch.no_grad():
        layer.qkv.weight[:16].zero_()
        layer.qkv.bias[:16].zero_()
    x = torch.randn(2, 5, 16)
    v = split_v(layer, x)
    torch.testing.assert_close(layer(x), merge(layer, v.mean(2, keepdim=True).expand_as(v)), rtol=1e-5, atol=1e-6)
    layer.softmax_sink = True                                        # a zero key: weight 1/(N+1) on v0 = 0
    torch.testing.assert_close(layer(x), merge(layer, v.sum(2, keepdim=True).expand_as(v) / 6), rtol=1e-5, atol=1e-6)


def test_softmax_learned_sink_is_an_extra_key():
    layer = make_layer("softmax", "learned")
    x = torch.randn(2, 5, 16)
    B, N, _ = x.shape
    q, k, v = layer.qkv(x).view(B, N, 3, 4, 4).permute(2, 0, 3, 1, 4)
    keys = torch.cat([layer.sink.k0.expand(B, 4, 1, 4), k], 2)
    values = torch.cat([layer.sink.v0.expand(B, 4, 1, 4), v], 2)
    p = torch.softmax(q @ keys.transpose(-1, -2) / 2.0, dim=-1)
    torch.testing.assert_close(layer(x), merge(layer, p @ values), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attention,sink,rope", list(itertools.product(ATTENTIONS, SINKS, [False, True])))
def test_causal_layer_never_looks_ahead(attention, sink, rope):
    layer = make_layer(attention, sink, rope, causal=True)
    x = torch.randn(2, 9, 16)
    positions = torch.cumsum(torch.rand(2, 9) + 0.5, dim=1)
    base = layer(x, positions)
    for i in range(8):
        x2, p2 = x.clone(), positions.clone()
        x2[:, i + 1:] += torch.randn_like(x2[:, i + 1:])
        p2[:, i + 1:] += 3.0                                         # later times move, order kept
        out = layer(x2, p2)
        torch.testing.assert_close(out[:, : i + 1], base[:, : i + 1], rtol=0, atol=1e-6)
        assert not torch.allclose(out[:, i + 1:], base[:, i + 1:])


def test_bidirectional_layer_sees_everything():
    layer = make_layer("continuous", "zeros")
    x = torch.randn(1, 6, 16)
    x2 = x.clone()
    x2[:, -1] += 1.0
    assert not torch.allclose(layer(x)[:, 0], layer(x2)[:, 0])


@pytest.mark.parametrize("attention,sink", list(itertools.product(ATTENTIONS, SINKS)))
def test_rope_layer_is_shift_invariant_in_positions(attention, sink):
    """With RoPE (the learned sink rotated to tau_0), only position differences matter."""
    layer = make_layer(attention, sink, rope=True)
    x = torch.randn(2, 7, 16)
    positions = torch.cumsum(torch.rand(2, 7) + 0.5, dim=1)
    torch.testing.assert_close(layer(x, positions + 5.25), layer(x, positions), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("attention,sink,rope", list(itertools.product(ATTENTIONS, SINKS, [False, True])))
def test_positions_regular_equals_default_and_irregular_differs(attention, sink, rope):
    layer = make_layer(attention, sink, rope)
    x = torch.randn(2, 7, 16)
    regular = torch.arange(7.0).expand(2, 7)
    torch.testing.assert_close(layer(x, regular), layer(x), rtol=1e-5, atol=1e-6)
    irregular = torch.tensor([0.0, 1.0, 2.0, 5.0, 6.0, 6.5, 9.0]).expand(2, 7)
    changed = not torch.allclose(layer(x, irregular), layer(x), atol=1e-5)
    # times reach softmax only through RoPE; continuous also through dt
    assert changed == (attention == "continuous" or rope)


def test_knot_dt():
    positions = torch.tensor([[0.0, 1.0, 3.0, 3.5]])
    torch.testing.assert_close(knot_dt(positions), torch.tensor([[1.0, 1.0, 2.0, 0.5]]))


@pytest.mark.parametrize("attention,rope", list(itertools.product(ATTENTIONS, [False, True])))
def test_gradients_reach_learned_sinks(attention, rope):
    layer = MultiHeadAttention(16, 4, attention=attention, sink="learned", rope=rope, causal=True)
    layer(torch.randn(2, 6, 16), torch.cumsum(torch.rand(2, 6) + 0.5, 1)).square().sum().backward()
    for p in (layer.sink.k0, layer.sink.v0):
        assert p.grad is not None and p.grad.abs().sum() > 0


def test_set_attention_keeps_weights_changes_outputs_and_is_saved():
    torch.manual_seed(0)
    model = torch.nn.Sequential(MultiHeadAttention(16, 4, sink="learned"), MultiHeadAttention(16, 4, rope=True)).eval()
    x = torch.randn(2, 6, 16)
    before = {k: v.clone() for k, v in model.state_dict().items() if torch.is_tensor(v)}
    out_softmax = model(x)
    assert set_attention(model, "continuous") == 2
    assert all(m.attention == "continuous" for m in model)
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    out_continuous = model(x)
    assert not torch.allclose(out_softmax, out_continuous)
    # a fresh (softmax) model loading the state dict comes back continuous
    fresh = torch.nn.Sequential(MultiHeadAttention(16, 4, sink="learned"), MultiHeadAttention(16, 4, rope=True)).eval()
    fresh.load_state_dict(model.state_dict())
    assert all(m.attention == "continuous" for m in fresh)
    torch.testing.assert_close(fresh(x), out_continuous)
    set_attention(model, "softmax")
    torch.testing.assert_close(model(x), out_softmax)


def test_continuous_layer_matches_reference_backend():
    layer = make_layer("continuous", "learned", rope=True, causal=True)
    x = torch.randn(2, 7, 16)
    positions = torch.cumsum(torch.rand(2, 7) + 0.5, 1)
    out = layer(x, positions)
    layer.backend = "reference"
    torch.testing.assert_close(out, layer(x, positions), rtol=1e-4, atol=1e-5)


def test_validation():
    with pytest.raises(ValueError, match="attention"):
        MultiHeadAttention(16, 4, attention="linear")
    with pytest.raises(ValueError, match="sink"):
        MultiHeadAttention(16, 4, sink="ones")
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(16, 3)
    with pytest.raises(ValueError, match="even"):
        MultiHeadAttention(12, 4, rope=True)
    with pytest.raises(ValueError, match="attention"):
        set_attention(MultiHeadAttention(16, 4), "linear")
    with pytest.raises(ValueError, match="no MultiHeadAttention"):
        set_attention(torch.nn.Linear(2, 2), "continuous")
    layer = MultiHeadAttention(16, 4)
    with pytest.raises(ValueError):
        layer.attention = "flash"
