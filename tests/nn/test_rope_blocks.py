"""RoPE properties; RevIN, prefix statistics, FeedForward and BatchNormTokens."""
import pytest
import torch

from tsattn.nn import BatchNormTokens, FeedForward, RevIN, RotaryEmbedding, apply_rope, causal_patch_statistics, rope_angles


def rotated_scores(q, k, pos_q, pos_k, head_dim=8):
    cq, sq = rope_angles(pos_q, head_dim)
    ck, sk = rope_angles(pos_k, head_dim)
    return apply_rope(q, cq, sq) @ apply_rope(k, ck, sk).transpose(-1, -2)


def test_rope_scores_depend_only_on_position_differences():
    torch.manual_seed(0)
    q, k = torch.randn(2, 3, 5, 8, dtype=torch.float64), torch.randn(2, 3, 5, 8, dtype=torch.float64)
    pos = torch.cumsum(torch.rand(2, 5, dtype=torch.float64) + 0.1, 1)   # irregular, real-valued
    base = rotated_scores(q, k, pos, pos)
    for shift in (1.0, -3.5, 123.25):
        torch.testing.assert_close(rotated_scores(q, k, pos + shift, pos + shift), base)
    # and it is not invariant to moving queries against keys
    assert not torch.allclose(rotated_scores(q, k, pos + 1.0, pos), base)


def test_rope_is_a_rotation_and_identity_at_zero():
    x = torch.randn(2, 3, 5, 8)
    rope = RotaryEmbedding(8)
    torch.testing.assert_close(rope(x, torch.zeros(5)), x)
    y = rope(x, torch.arange(5.0) * 1.7)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    with pytest.raises(ValueError):
        RotaryEmbedding(7)


@pytest.mark.parametrize("affine", [False, True])
def test_revin_round_trip(affine):
    revin = RevIN(3, affine=affine)
    if affine:
        with torch.no_grad():
            revin.weight.uniform_(0.5, 2.0)
            revin.bias.normal_()
    x = 5 + 3 * torch.randn(4, 50, 3)
    mean, std = revin.statistics(x)
    assert mean.shape == std.shape == (4, 1, 3)
    z = revin.normalize(x, mean, std)
    if not affine:
        torch.testing.assert_close(z.mean(1), torch.zeros(4, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(revin.denormalize(z, mean, std), x, rtol=1e-4, atol=1e-4)


def test_causal_patch_statistics_are_prefix_statistics():
    torch.manual_seed(0)
    patches = 10 + 2 * torch.randn(3, 6, 4, 2, dtype=torch.float64)  # [B, N, P, C]
    mean, std = causal_patch_statistics(patches)
    assert mean.shape == std.shape == (3, 6, 1, 2)
    revin = RevIN(2)
    for i in range(6):
        m, s = revin.statistics(patches[:, : i + 1].reshape(3, -1, 2))
        torch.testing.assert_close(mean[:, i], m)
        torch.testing.assert_close(std[:, i], s)


def test_feed_forward_and_batchnorm_tokens_shapes():
    x = torch.randn(4, 7, 16)
    assert FeedForward(16, 32, 0.1)(x).shape == x.shape
    bn = BatchNormTokens(16)
    ref = torch.nn.BatchNorm1d(16)
    ref.load_state_dict(bn.norm.state_dict())
    torch.testing.assert_close(bn(x), ref(x.transpose(1, 2)).transpose(1, 2))
