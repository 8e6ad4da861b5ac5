"""The attention layer and its parts: RoPE, sinks, multi-head attention (softmax | continuous), blocks."""
from .attention import ATTENTIONS, MultiHeadAttention, knot_dt, set_attention
from .blocks import BatchNormTokens, FeedForward, RevIN, causal_patch_statistics
from .dropout import Dropout, dropout
from .rope import RotaryEmbedding, apply_rope, rope_angles
from .sinks import SINKS, SinkKV

__all__ = [
    "ATTENTIONS",
    "SINKS",
    "BatchNormTokens",
    "Dropout",
    "FeedForward",
    "MultiHeadAttention",
    "RevIN",
    "RotaryEmbedding",
    "SinkKV",
    "apply_rope",
    "causal_patch_statistics",
    "dropout",
    "knot_dt",
    "rope_angles",
    "set_attention",
]
