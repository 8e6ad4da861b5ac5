"""benchmarks/attention_difference.py reads attention weights by one-hot values: each weighting's rows
sum to one and, applied to the sink and values, give the layer's own output."""
import pytest
import torch

from tsattn.nn.attention import MultiHeadAttention


@pytest.mark.parametrize("kind", ["self", "cross"])
def test_one_hot_values_give_the_weights_the_layer_uses(benchmark_script, kind):
    module_ = benchmark_script("attention_difference")
    torch.manual_seed(0)
    attn = MultiHeadAttention(8, 2, attention="continuous", sink="learned", rope=True, backend="torch").double()
    with torch.no_grad():
        attn.sink.k0.normal_()
        attn.sink.v0.normal_()
    B, H, N, D = 3, 2, 5, 4
    M = N if kind == "self" else 4
    q, k, v = torch.randn(B, H, M, D).double(), torch.randn(B, H, N, D).double(), torch.randn(B, H, N, D).double()
    times = torch.cumsum(torch.rand(B, N).double() + 0.1, dim=1)
    positions = times if kind == "self" else times[:, -1:] + torch.rand(B, M).double()
    lengths = torch.tensor([5, 3, 1])
    probe = module_.Probe()
    for attention in ("continuous", "softmax"):
        w = probe.weights(attn, attention, q, k, v, positions, times, lengths)      # [B, H, M, N + 1]
        torch.testing.assert_close(w.sum(-1), torch.ones(B, H, M, dtype=w.dtype))
        attn.attention = attention
        own = attn.attend(q, k, v, positions, times, lengths)
        k0, v0 = attn.sink(k, v)
        values = torch.cat([v0.expand(B, H, 1, D), v], dim=2)                     # [B, H, N + 1, D]
        torch.testing.assert_close(w @ values, own)
        assert (w[..., 4:][lengths < 4].abs() < 1e-12).all()                        # padded keys get nothing
    assert attn.attention == "softmax" and "forward" not in vars(attn.sink)     # the layer left as it was


def test_the_probe_averages_over_rows_and_heads(benchmark_script):
    module_ = benchmark_script("attention_difference")
    torch.manual_seed(1)
    attn = MultiHeadAttention(8, 4, attention="continuous", sink="learned", backend="torch").double()
    B, H, N, D = 2, 4, 6, 2
    q, k, v = (torch.randn(B, H, N, D).double() for _ in range(3))
    times = torch.cumsum(torch.rand(B, N).double() + 0.1, dim=1)
    lengths = torch.tensor([6, 4])
    probe = module_.Probe()
    probe.record(attn, q, k, v, times, times, lengths)
    w = {a: probe.weights(attn, a, q, k, v, times, times, lengths) for a in ("continuous", "softmax")}
    valid = torch.arange(N)[None, :] < lengths[:, None]                               # [B, M]
    rows = sum(probe.rows[("self", b)] for b in ("4-7",))
    assert rows == int(valid.sum()) * H
    sink = w["softmax"][..., 0].permute(0, 2, 1)[valid].mean()                        # over rows and heads
    assert abs(probe.sink[("self", "softmax")] / rows - float(sink)) < 1e-9
    assert 0.0 <= probe.tv[("self", "4-7")] / rows <= 1.0


def test_series_layers_are_counted_as_their_own_kinds(benchmark_script):
    """Layers of the series sequence go to "series self" / "series cross"; a series cross-attention reads
    which queries are real from the batch's mask (its padded queries are not zero vectors)."""
    module_ = benchmark_script("attention_difference")
    torch.manual_seed(2)
    attn = MultiHeadAttention(8, 2, attention="continuous", sink="learned", backend="torch").double()
    B, H, N, M, D = 2, 2, 5, 3, 4
    q, k, v = torch.randn(B, H, M, D).double(), torch.randn(B, H, N, D).double(), torch.randn(B, H, N, D).double()
    times = torch.cumsum(torch.rand(B, N).double() + 0.1, dim=1)
    positions = torch.rand(B, M).double() + times[:, -1:]
    lengths = torch.tensor([5, 2])
    probe = module_.Probe([attn])
    with pytest.raises(ValueError, match="query_mask"):
        probe.record(attn, q, k, v, positions, times, lengths)
    probe.query_mask = torch.tensor([[True, True, False], [True, False, False]])
    probe.record(attn, q, k, v, positions, times, lengths)
    assert probe.rows[("series cross", "4-7")] == 2 * H and probe.rows[("series cross", "2-3")] == 1 * H
    assert not any(kind == "cross" for kind, _ in probe.rows)
    plain = module_.Probe()
    plain.record(attn, q, k, v, positions, times, lengths)                    # not a series layer: "cross"
    assert sum(plain.rows[("cross", b)] for b in ("4-7", "2-3")) == B * M * H


def test_series_layers_are_found_in_each_member_of_an_ensemble(benchmark_script):
    from tsattn.models.ensemble import Ensemble
    from tsattn.models.irregular import IrregularTransformer

    module_ = benchmark_script("attention_difference")
    torch.manual_seed(3)
    net = IrregularTransformer(3, d_model=8, n_heads=2, n_layers=1, d_ff=8, series_layers=1)
    one = module_.series_layers(net)
    assert one and all(isinstance(m, MultiHeadAttention) for m in one)
    everything = [m for m in net.modules() if isinstance(m, MultiHeadAttention)]
    assert len(one) < len(everything)                                   # the variables' own layers are not
    pair = Ensemble([net, IrregularTransformer(3, d_model=8, n_heads=2, n_layers=1, d_ff=8, series_layers=1)])
    assert len(module_.series_layers(pair)) == 2 * len(one)
