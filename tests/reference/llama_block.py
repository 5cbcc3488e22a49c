#!/usr/bin/env python3
"""The reference for tests/unit/models/test_llama_block.cpp: the Llama-style
decoder block of examples/user_project/llama_block.hpp written with PyTorch
(as Hugging Face's LlamaDecoderLayer computes it: RMSNorm, rotary embeddings
with rotate_half, grouped-query causal attention, SwiGLU), in float64, with
random weights and input. Writes the weights, the input, a probe r, the loss
sum(block(x) * r) and every gradient as JSON.

    python3 tests/reference/llama_block.py > tests/reference/llama_block.json

Needs PyTorch (Debian's python3-torch); the JSON it wrote is committed, so
the test runs without it.
"""
import json
import math
import sys

import torch

torch.manual_seed(0)
torch.set_default_dtype(torch.float64)
DIM, HEADS, KV_HEADS, HIDDEN, THETA, EPS = 16, 4, 2, 32, 10000.0, 1e-5
HEAD = DIM // HEADS
BATCH, TIME = 2, 6

shapes = {
    "input_layernorm.weight": [DIM],
    "self_attn.q_proj.weight": [HEADS * HEAD, DIM],
    "self_attn.k_proj.weight": [KV_HEADS * HEAD, DIM],
    "self_attn.v_proj.weight": [KV_HEADS * HEAD, DIM],
    "self_attn.o_proj.weight": [DIM, HEADS * HEAD],
    "post_attention_layernorm.weight": [DIM],
    "mlp.gate_proj.weight": [HIDDEN, DIM],
    "mlp.up_proj.weight": [HIDDEN, DIM],
    "mlp.down_proj.weight": [DIM, HIDDEN],
}
weights = {}
for name, shape in shapes.items():
    if name.endswith("layernorm.weight"):
        weights[name] = (1 + 0.1 * torch.randn(shape)).requires_grad_()
    else:
        weights[name] = (torch.randn(shape) / math.sqrt(shape[-1])).requires_grad_()
x = torch.randn(BATCH, TIME, DIM).requires_grad_()
probe = torch.randn(BATCH, TIME, DIM)


def rms_norm(h, w):
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS) * w


def rotate_half(h):
    return torch.cat((-h[..., HEAD // 2:], h[..., : HEAD // 2]), dim=-1)


def block(h):
    w = weights
    inv_freq = 1.0 / (THETA ** (torch.arange(0, HEAD, 2, dtype=torch.float64) / HEAD))
    freqs = torch.outer(torch.arange(TIME, dtype=torch.float64), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    a = rms_norm(h, w["input_layernorm.weight"])
    q = (a @ w["self_attn.q_proj.weight"].T).view(BATCH, TIME, HEADS, HEAD).transpose(1, 2)
    k = (a @ w["self_attn.k_proj.weight"].T).view(BATCH, TIME, KV_HEADS, HEAD).transpose(1, 2)
    v = (a @ w["self_attn.v_proj.weight"].T).view(BATCH, TIME, KV_HEADS, HEAD).transpose(1, 2)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    k = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
    v = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(HEAD)
    scores = scores.masked_fill(torch.triu(torch.ones(TIME, TIME, dtype=torch.bool), 1), float("-inf"))
    attn = (scores.softmax(-1) @ v).transpose(1, 2).reshape(BATCH, TIME, HEADS * HEAD)
    h = h + attn @ w["self_attn.o_proj.weight"].T
    m = rms_norm(h, w["post_attention_layernorm.weight"])
    gated = torch.nn.functional.silu(m @ w["mlp.gate_proj.weight"].T) * (m @ w["mlp.up_proj.weight"].T)
    return h + gated @ w["mlp.down_proj.weight"].T


loss = (block(x) * probe).sum()
loss.backward()
flat = lambda t: [float(v) for v in t.detach().reshape(-1)]
json.dump(
    {
        "made_by": f"tests/reference/llama_block.py with PyTorch {torch.__version__}, float64",
        "config": {"dim": DIM, "heads": HEADS, "kv_heads": KV_HEADS, "hidden": HIDDEN, "rope_theta": THETA, "eps": EPS},
        "input": {"shape": [BATCH, TIME, DIM], "values": flat(x)},
        "probe": flat(probe),
        "weights": {n: {"shape": shapes[n], "values": flat(t)} for n, t in weights.items()},
        "loss": float(loss),
        "grad_input": flat(x.grad),
        "grads": {n: flat(t.grad) for n, t in weights.items()},
    },
    sys.stdout,
)
