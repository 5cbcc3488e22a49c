#!/usr/bin/env python3
"""Tiny decoders in Hugging Face's directory layout, and what they compute,
for tests/unit/models/test_llama_family.cpp.

For each model_type levers reads (llama, mistral, qwen2, qwen3, smollm3,
gemma2, gemma3_text, phi3, mixtral, qwen3_moe) this makes a model of two layers with random weights,
writes it as Hugging Face does (config.json, model.safetensors or shards with
model.safetensors.index.json, in float32 or bfloat16), and computes with
PyTorch in float64, from the weights as stored, what transformers'
modeling_<type>.py computes: the logits of a batch, its mean next-token loss,
the gradients of that loss, and a greedy continuation of a prompt. The models
differ where the families do: grouped-query heads and llama3 rope scaling
(llama), a sliding window (mistral), q/k/v biases (qwen2), per-head RMSNorm
of q and k and a head_dim of its own (qwen3), a layer without rotary
embeddings (smollm3's no_rope_layers), and Gemma's (norms of 1 + weight
before and after attention and the MLP, GeGLU, embeddings times
sqrt(hidden), queries scaled by query_pre_attn_scalar, a sliding layer and a
global one, gemma2's soft-capped scores and logits, gemma3_text's q/k norms
and the sliding layer's own rope base with linear scaling on the global one),
and Phi-3's (fused qkv_proj and gate_up_proj, a partial rotation, longrope
scaling whose long factors take over past the original length, a sliding
window), and the mixtures of experts: Mixtral's block_sparse_moe (experts
w1/w3/w2, top-2 renormalised) and Qwen3-MoE's (q/k norms, top-2 of 6 not
renormalised, a dense layer among the sparse ones by mlp_only_layers, three
layers), each with output_router_logits, so the loss is transformers' cross
entropy plus router_aux_loss_coef times its load_balancing_loss_func, and
the reference records that auxiliary loss and which experts each token
went to in each sparse layer; tied and separate output embeddings. The greedy continuation is
what generation through transformers' cache computes: each position turned
by the factors of the step that added it (for longrope, the short ones while
the sequence stays within the original length).

    /usr/bin/python3 tests/reference/hf_models.py tests/reference/hf [model_type ...]

Needs PyTorch (Debian's python3-torch); what it wrote is committed, so the
tests run without it. safetensors is written by hand (struct + json): Debian
packages no safetensors for Python.
"""
import json
import math
import os
import struct
import sys

import torch

COMMON = {
    "vocab_size": 64,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 64,
    "hidden_act": "silu",
    "initializer_range": 0.02,
    "bos_token_id": 1,
    "eos_token_id": 2,
}

MODELS = {
    "llama": dict(
        config={**COMMON, "model_type": "llama", "architectures": ["LlamaForCausalLM"], "num_key_value_heads": 2,
                "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": True, "attention_bias": False,
                "mlp_bias": False, "eos_token_id": [2, 3],
                "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                 "high_freq_factor": 4.0, "original_max_position_embeddings": 16}},
        dtype="F32", shards=1),
    "mistral": dict(
        config={**COMMON, "model_type": "mistral", "architectures": ["MistralForCausalLM"], "num_key_value_heads": 1,
                "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "sliding_window": 5},
        dtype="BF16", shards=3),
    "qwen2": dict(
        config={**COMMON, "model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"], "num_key_value_heads": 2,
                "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": True,
                "use_sliding_window": False, "sliding_window": 4096, "max_window_layers": 2},
        dtype="F32", shards=2),
    "qwen3": dict(
        config={**COMMON, "model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "num_key_value_heads": 2,
                "head_dim": 16, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": False,
                "attention_bias": False, "use_sliding_window": False, "sliding_window": None},
        dtype="BF16", shards=1),
    "smollm3": dict(
        config={**COMMON, "model_type": "smollm3", "architectures": ["SmolLM3ForCausalLM"], "num_key_value_heads": 2,
                "rms_norm_eps": 1e-6, "rope_theta": 5000000.0, "tie_word_embeddings": True,
                "attention_bias": False, "mlp_bias": False, "use_sliding_window": False, "sliding_window": None,
                "no_rope_layers": [1, 0]},
        dtype="BF16", shards=2),
    "gemma2": dict(
        config={**COMMON, "model_type": "gemma2", "architectures": ["Gemma2ForCausalLM"], "num_key_value_heads": 2,
                "head_dim": 12, "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
                "rope_theta": 10000.0, "tie_word_embeddings": True, "attention_bias": False,
                "query_pre_attn_scalar": 16, "sliding_window": 4, "attn_logit_softcapping": 2.0,
                "final_logit_softcapping": 3.0},
        dtype="F32", shards=1),
    "gemma3_text": dict(
        config={**COMMON, "model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"],
                "num_key_value_heads": 2, "head_dim": 16, "hidden_activation": "gelu_pytorch_tanh",
                "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
                "rope_scaling": {"rope_type": "linear", "factor": 8.0}, "tie_word_embeddings": True,
                "attention_bias": False, "query_pre_attn_scalar": 24, "sliding_window": 4,
                "layer_types": ["sliding_attention", "full_attention"], "final_logit_softcapping": None,
                "attn_logit_softcapping": None},
        dtype="BF16", shards=2),
    "phi3": dict(
        config={**COMMON, "model_type": "phi3", "architectures": ["Phi3ForCausalLM"], "num_key_value_heads": 2,
                "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False, "attention_bias": False,
                "partial_rotary_factor": 0.75, "sliding_window": 7, "original_max_position_embeddings": 8,
                "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.5, 2.5],
                                 "long_factor": [3.0, 5.0, 9.0]}},
        dtype="F32", shards=2),
    "mixtral": dict(
        config={**COMMON, "model_type": "mixtral", "architectures": ["MixtralForCausalLM"], "num_key_value_heads": 2,
                "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "tie_word_embeddings": False, "sliding_window": None,
                "num_local_experts": 4, "num_experts_per_tok": 2, "router_aux_loss_coef": 0.02,
                "output_router_logits": True},
        dtype="F32", shards=3),
    "qwen3_moe": dict(
        config={**COMMON, "model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"],
                "num_hidden_layers": 3, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0, "tie_word_embeddings": False, "attention_bias": False,
                "use_sliding_window": False, "sliding_window": None, "num_experts": 6, "num_experts_per_tok": 2,
                "moe_intermediate_size": 24, "norm_topk_prob": False, "decoder_sparse_step": 1,
                "mlp_only_layers": [1], "router_aux_loss_coef": 0.05, "output_router_logits": True},
        dtype="BF16", shards=1),
}
BATCH, TIME = 2, 9


def gemma(c):
    return c["model_type"] in ("gemma2", "gemma3_text")


def layer_attention(c, l):
    """(sliding window or None, rope base or None, rope_scaling or None) of layer l, as transformers reads them."""
    window, theta, scaling = None, c["rope_theta"], c.get("rope_scaling")
    if c["model_type"] in ("mistral", "phi3"):
        window = c.get("sliding_window")
    if gemma(c):
        types = c.get("layer_types") or ["sliding_attention" if (i + 1) % 2 else "full_attention"
                                         for i in range(c["num_hidden_layers"])]
        if types[l] == "sliding_attention":
            window = c["sliding_window"]
            if c["model_type"] == "gemma3_text":
                theta, scaling = c["rope_local_base_freq"], None
    if c["model_type"] == "smollm3" and not c["no_rope_layers"][l]:
        theta = None
    return window, theta, scaling


def experts(c):
    """The experts of a mixture, or 0 for a dense model."""
    return c.get("num_local_experts", 0) if c["model_type"] == "mixtral" else c.get("num_experts", 0)


def sparse(c, l):
    """Whether layer l's MLP is a mixture of experts, as transformers' Qwen3MoeDecoderLayer decides."""
    step = c.get("decoder_sparse_step", 1)
    return experts(c) > 0 and l not in c.get("mlp_only_layers", []) and (l + 1) % step == 0


def expert_names(c):
    """The MoE block's name and its experts' (gate, up, down) projections."""
    if c["model_type"] == "mixtral":
        return "block_sparse_moe", ("w1", "w3", "w2")
    return "mlp", ("gate_proj", "up_proj", "down_proj")


def head_dim(c):
    return c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]


def rotary_dim(c):
    return int(head_dim(c) * c.get("partial_rotary_factor", 1.0))


def shapes(c):
    d, hd, i, v = c["hidden_size"], head_dim(c), c["intermediate_size"], c["vocab_size"]
    q, kv = c["num_attention_heads"] * hd, c["num_key_value_heads"] * hd
    bias = c["model_type"] == "qwen2" or c.get("attention_bias", False)
    out = {"model.embed_tokens.weight": [v, d]}
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        out[p + "input_layernorm.weight"] = [d]
        if c["model_type"] == "phi3":
            out[p + "self_attn.qkv_proj.weight"] = [q + 2 * kv, d]
        else:
            out[p + "self_attn.q_proj.weight"] = [q, d]
            out[p + "self_attn.k_proj.weight"] = [kv, d]
            out[p + "self_attn.v_proj.weight"] = [kv, d]
        if bias:
            out[p + "self_attn.q_proj.bias"] = [q]
            out[p + "self_attn.k_proj.bias"] = [kv]
            out[p + "self_attn.v_proj.bias"] = [kv]
        out[p + "self_attn.o_proj.weight"] = [d, q]
        if c["model_type"] in ("qwen3", "qwen3_moe", "gemma3_text"):
            out[p + "self_attn.q_norm.weight"] = [hd]
            out[p + "self_attn.k_norm.weight"] = [hd]
        out[p + "post_attention_layernorm.weight"] = [d]
        if gemma(c):
            out[p + "pre_feedforward_layernorm.weight"] = [d]
            out[p + "post_feedforward_layernorm.weight"] = [d]
        if sparse(c, l):
            block, (g, u, dn) = expert_names(c)
            mi = c.get("moe_intermediate_size", i) if c["model_type"] == "qwen3_moe" else i
            out[p + block + ".gate.weight"] = [experts(c), d]
            for e in range(experts(c)):
                out[p + f"{block}.experts.{e}.{g}.weight"] = [mi, d]
                out[p + f"{block}.experts.{e}.{u}.weight"] = [mi, d]
                out[p + f"{block}.experts.{e}.{dn}.weight"] = [d, mi]
            continue
        if c["model_type"] == "phi3":
            out[p + "mlp.gate_up_proj.weight"] = [2 * i, d]
        else:
            out[p + "mlp.gate_proj.weight"] = [i, d]
            out[p + "mlp.up_proj.weight"] = [i, d]
        out[p + "mlp.down_proj.weight"] = [d, i]
    out["model.norm.weight"] = [d]
    if not c["tie_word_embeddings"]:
        out["lm_head.weight"] = [v, d]
    return out


def random_weights(c, dtype, seed):
    torch.manual_seed(seed)
    w = {}
    for name, shape in shapes(c).items():
        if name.endswith("norm.weight"):  # Gemma's multiply by 1 + weight
            t = (0 if gemma(c) else 1) + 0.1 * torch.randn(shape)
        elif name.endswith(".bias"):
            t = 0.1 * torch.randn(shape)
        else:
            t = torch.randn(shape) / math.sqrt(shape[-1])
        # As stored: the reference computes from the rounded values.
        t = t.to(torch.bfloat16 if dtype == "BF16" else torch.float32)
        w[name] = t
    return w


def tensor_bytes(t):
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().tobytes()
    return t.contiguous().numpy().tobytes()


def write_safetensors(path, tensors):
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, t in tensors.items():
        b = tensor_bytes(t)
        header[name] = {"dtype": "BF16" if t.dtype == torch.bfloat16 else "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(b)]}
        offset += len(b)
        blobs.append(b)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def write_model(directory, c, weights, shards):
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    names = list(weights)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), weights)
        return
    weight_map, total = {}, 0
    per = math.ceil(len(names) / shards)
    for s in range(shards):
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: weights[n] for n in names[s * per:(s + 1) * per]}
        write_safetensors(os.path.join(directory, file), part)
        for n, t in part.items():
            weight_map[n] = file
            total += t.numel() * t.element_size()
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def inverse_frequencies(c, theta, s, length):
    """The rotating part's frequencies for a forward reaching `length` positions."""
    rd = rotary_dim(c)
    inv = 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float64) / rd))
    if not s:
        return inv
    kind = s.get("rope_type", s.get("type"))
    if kind == "linear":  # transformers' _compute_linear_scaling_rope_parameters
        return inv / s["factor"]
    if kind == "longrope":  # transformers' _compute_longrope_parameters, chosen per forward by its length
        original = c.get("original_max_position_embeddings", c["max_position_embeddings"])
        factors = s["long_factor"] if length > original else s["short_factor"]
        return inv / torch.tensor(factors, dtype=torch.float64)
    # transformers' _compute_llama3_parameters
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    low_wavelen, high_wavelen = old / low, old / high
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def rms_norm(h, w, eps, offset=0):
    return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * (offset + w)


def rotate_half(h):
    half = h.shape[-1] // 2
    return torch.cat((-h[..., half:], h[..., :half]), dim=-1)


def attention_factor(c, s):
    """longrope's scale of cos and sin: sqrt(1 + ln(factor) / ln(original)), factor = longest / original."""
    if not s or s.get("rope_type", s.get("type")) != "longrope":
        return 1.0
    original = c.get("original_max_position_embeddings", c["max_position_embeddings"])
    factor = c["max_position_embeddings"] / original
    return 1.0 if factor <= 1 else math.sqrt(1 + math.log(factor) / math.log(original))


def rotate(c, x, cos, sin):
    """Phi-3's apply_rotary_pos_emb: the first rotary_dim elements turned, the rest passed."""
    rd = rotary_dim(c)
    turned, rest = x[..., :rd], x[..., rd:]
    return torch.cat((turned * cos + rotate_half(turned) * sin, rest), dim=-1)


def sparse_moe(c, w, m, p, act, lin, routed):
    """transformers' MixtralSparseMoeBlock / Qwen3MoeSparseMoeBlock: softmax over the router's logits, the top k
    (renormalised where norm_topk_prob; always in Mixtral), a loop over the experts with index_add_."""
    block, (g, u, dn) = expert_names(c)
    shape = m.shape
    x = m.reshape(-1, shape[-1])
    logits = lin(x, p + block + ".gate")
    probs = logits.softmax(-1)
    weights, chosen = probs.topk(c["num_experts_per_tok"], dim=-1)
    if c["model_type"] == "mixtral" or c.get("norm_topk_prob"):
        weights = weights / weights.sum(-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(experts(c)):
        rows, slot = torch.where(chosen == e)
        if rows.numel() == 0:
            continue
        q = p + f"{block}.experts.{e}."
        xe = x[rows]
        y = lin(act(lin(xe, q + g)) * lin(xe, q + u), q + dn) * weights[rows, slot, None]
        out = out.index_add(0, rows, y)
    routed.append((logits, chosen))
    return out.reshape(shape)


def load_balancing_loss(c, routed):
    """transformers' load_balancing_loss_func without an attention mask: every sparse layer's logits together."""
    logits = torch.cat([r[0] for r in routed], dim=0)
    probs = logits.softmax(-1)
    _, chosen = probs.topk(c["num_experts_per_tok"], dim=-1)
    mask = torch.nn.functional.one_hot(chosen, experts(c)).to(probs.dtype)
    return (mask.mean(0) * probs.mean(0).unsqueeze(0)).sum() * experts(c)


def forward(c, w, tokens, lengths=None, routed=None):
    """lengths[p]: the length of the forward that computed position p (all of tokens' by default; generation
    through a cache computes each new position in a forward of its own)."""
    b, t = tokens.shape
    lengths = lengths or [t] * t
    hd, heads, kv_heads, eps = head_dim(c), c["num_attention_heads"], c["num_key_value_heads"], c["rms_norm_eps"]
    offset = 1 if gemma(c) else 0
    norm = lambda x, name: rms_norm(x, w[name + ".weight"], eps, offset)
    lin = lambda x, name: x @ w[name + ".weight"].T + (w[name + ".bias"] if name + ".bias" in w else 0)
    if c.get("hidden_activation", c.get("hidden_act")) == "gelu_pytorch_tanh":
        act = lambda x: torch.nn.functional.gelu(x, approximate="tanh")
    else:
        act = torch.nn.functional.silu
    scale = c["query_pre_attn_scalar"] ** -0.5 if gemma(c) else hd ** -0.5
    softcap = c.get("attn_logit_softcapping") if c["model_type"] == "gemma2" else None
    h = w["model.embed_tokens.weight"][tokens]
    if gemma(c):
        h = h * math.sqrt(c["hidden_size"])
    for l in range(c["num_hidden_layers"]):
        p = f"model.layers.{l}."
        window, theta, scaling = layer_attention(c, l)
        blocked = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        if window:  # a query sees itself and the window - 1 keys before it
            blocked |= torch.tril(torch.ones(t, t, dtype=torch.bool), -window)
        a = norm(h, p + "input_layernorm")
        if c["model_type"] == "phi3":
            qkv = lin(a, p + "self_attn.qkv_proj")
            q, k, v = qkv.split([heads * hd, kv_heads * hd, kv_heads * hd], dim=-1)
            q, k, v = q.view(b, t, heads, hd), k.view(b, t, kv_heads, hd), v.view(b, t, kv_heads, hd).transpose(1, 2)
        else:
            q = lin(a, p + "self_attn.q_proj").view(b, t, heads, hd)
            k = lin(a, p + "self_attn.k_proj").view(b, t, kv_heads, hd)
            v = lin(a, p + "self_attn.v_proj").view(b, t, kv_heads, hd).transpose(1, 2)
        if c["model_type"] in ("qwen3", "qwen3_moe", "gemma3_text"):
            q = norm(q, p + "self_attn.q_norm")
            k = norm(k, p + "self_attn.k_norm")
        q, k = q.transpose(1, 2), k.transpose(1, 2)
        if theta:
            freqs = torch.stack([pos * inverse_frequencies(c, theta, scaling, lengths[pos]) for pos in range(t)])
            emb = torch.cat((freqs, freqs), dim=-1)
            amplitude = attention_factor(c, scaling)
            cos, sin = emb.cos() * amplitude, emb.sin() * amplitude
            q, k = rotate(c, q, cos, sin), rotate(c, k, cos, sin)
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) * scale
        if softcap:
            scores = torch.tanh(scores / softcap) * softcap
        scores = scores.masked_fill(blocked, float("-inf"))
        y = lin((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, heads * hd), p + "self_attn.o_proj")
        if gemma(c):
            h = h + norm(y, p + "post_attention_layernorm")
            m = norm(h, p + "pre_feedforward_layernorm")
        else:
            h = h + y
            m = norm(h, p + "post_attention_layernorm")
        if sparse(c, l):
            y = sparse_moe(c, w, m, p, act, lin, routed if routed is not None else [])
        else:
            if c["model_type"] == "phi3":  # the gate's half first
                gate, up = lin(m, p + "mlp.gate_up_proj").chunk(2, dim=-1)
            else:
                gate, up = lin(m, p + "mlp.gate_proj"), lin(m, p + "mlp.up_proj")
            y = lin(act(gate) * up, p + "mlp.down_proj")
        h = h + (norm(y, p + "post_feedforward_layernorm") if gemma(c) else y)
    h = norm(h, "model.norm")
    head = w["model.embed_tokens.weight"] if c["tie_word_embeddings"] else w["lm_head.weight"]
    logits = h @ head.T
    cap = c.get("final_logit_softcapping") if gemma(c) else None
    return torch.tanh(logits / cap) * cap if cap else logits


def flat(t):
    return [float(v) for v in t.detach().reshape(-1)]


def reference(c, stored):
    w = {n: t.to(torch.float64).requires_grad_() for n, t in stored.items()}
    g = torch.Generator().manual_seed(7)
    tokens = torch.randint(0, c["vocab_size"], (BATCH, TIME), generator=g)
    targets = torch.randint(0, c["vocab_size"], (BATCH, TIME), generator=g)
    targets[1, 3] = -100  # ignored
    routed = []
    logits = forward(c, w, tokens, routed=routed)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, c["vocab_size"]), targets.reshape(-1),
                                             ignore_index=-100)
    extra = {}
    if routed:  # MixtralForCausalLM's and Qwen3MoeForCausalLM's loss with output_router_logits
        aux = load_balancing_loss(c, routed)
        extra = {"cross_entropy": float(loss), "aux_loss": float(aux),
                 "experts": [r[1].reshape(-1).tolist() for r in routed]}
        loss = loss + c["router_aux_loss_coef"] * aux
    loss.backward()
    with torch.no_grad():
        prompt = tokens[0, :4].tolist()
        for _ in range(6):  # the prompt in one forward, then a forward per position
            lengths = [4] * 4 + list(range(5, len(prompt) + 1))
            nxt = forward(c, w, torch.tensor([prompt]), lengths)[0, -1].argmax().item()
            prompt.append(nxt)
    query = "qkv_proj" if c["model_type"] == "phi3" else "q_proj"
    full = ["model.embed_tokens.weight", f"model.layers.0.self_attn.{query}.weight"]
    last = c["num_hidden_layers"] - 1
    if sparse(c, last):
        block, (_, _, down) = expert_names(c)
        full += [f"model.layers.{last}.{block}.gate.weight", f"model.layers.{last}.{block}.experts.1.{down}.weight"]
    else:
        full.append(f"model.layers.{last}.mlp.down_proj.weight")
    return {
        **extra,
        "made_by": f"tests/reference/hf_models.py with PyTorch {torch.__version__}, float64 from the stored weights",
        "tokens": tokens.reshape(-1).tolist(),
        "targets": targets.reshape(-1).tolist(),
        "shape": [BATCH, TIME],
        "logits": flat(logits),
        "loss": float(loss),
        "grad_sum_squares": {n: float(t.grad.pow(2).sum()) if t.grad is not None else 0.0 for n, t in w.items()},
        "grads": {n: flat(w[n].grad) for n in full},
        "greedy": {"prompt": tokens[0, :4].tolist(), "tokens": prompt},
    }


def main(out, only):
    for seed, (name, m) in enumerate(MODELS.items()):
        if only and name not in only:
            continue
        directory = os.path.join(out, name)
        weights = random_weights(m["config"], m["dtype"], seed)
        cfg = {**m["config"], "torch_dtype": "bfloat16" if m["dtype"] == "BF16" else "float32"}
        write_model(directory, cfg, weights, m["shards"])
        with open(os.path.join(out, name + ".json"), "w") as f:
            json.dump(reference(cfg, weights), f)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/reference/hf", sys.argv[2:])
