"""PyTorch's peer of bench_moe_step: the same mixture of experts, read from
the Hugging Face directory bench_moe_step saved (so the same tokens go to the
same experts), computed as transformers' modeling_mixtral.py computes it:
softmax over the router's logits in float32, the top 2 renormalised, a loop
over the experts each taking its tokens through torch.where on a one-hot
mask and adding its weighted output back with index_add_, and
load_balancing_loss_func over every layer's router logits times
router_aux_loss_coef added to the loss. Attention and norms are
bench/model_steps.py's Llama block. Forward, loss, backward, AdamW on the
same two sequences of real tokens (--ids); the median step. Prints one JSON
object."""
import argparse
import json
import os
import resource
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from model_steps import LlamaBlock, RmsNorm, median_ms, peer_arguments, set_up_torch  # noqa: E402


class Expert(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1, self.w3 = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class SparseMoeBlock(nn.Module):
    def __init__(self, dim, hidden, experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.gate = nn.Linear(dim, experts, bias=False)
        self.experts = nn.ModuleList(Expert(dim, hidden) for _ in range(experts))

    def forward(self, x):
        b, t, d = x.shape
        h = x.view(-1, d)
        logits = self.gate(h)
        weights = F.softmax(logits, dim=1, dtype=torch.float)
        weights, chosen = torch.topk(weights, self.top_k, dim=-1)
        weights = (weights / weights.sum(dim=-1, keepdim=True)).to(h.dtype)
        out = torch.zeros_like(h)
        mask = F.one_hot(chosen, num_classes=len(self.experts)).permute(2, 1, 0)
        for e, expert in enumerate(self.experts):
            slot, rows = torch.where(mask[e])
            y = expert(h[None, rows].reshape(-1, d)) * weights[rows, slot, None]
            out.index_add_(0, rows, y.to(h.dtype))
        return out.view(b, t, d), logits


class MixtralLayer(LlamaBlock):
    def __init__(self, dim, heads, kv_heads, hidden, experts, top_k):
        super().__init__(dim, heads, kv_heads, hidden)
        del self.gate_proj, self.up_proj, self.down_proj
        self.block_sparse_moe = SparseMoeBlock(dim, hidden, experts, top_k)

    def forward(self, x):
        h = self.attend(x)
        y, logits = self.block_sparse_moe(self.post_attention_layernorm(h))
        return h + y, logits


def load_balancing_loss(router_logits, experts, top_k):
    """transformers' load_balancing_loss_func without an attention mask."""
    probs = F.softmax(torch.cat(router_logits, dim=0), dim=-1)
    _, chosen = torch.topk(probs, top_k, dim=-1)
    mask = F.one_hot(chosen, experts)
    return torch.sum(mask.float().mean(dim=0) * probs.mean(dim=0).unsqueeze(0)) * experts


class Mixtral(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d = c["hidden_size"]
        self.embed_tokens = nn.Embedding(c["vocab_size"], d)
        self.layers = nn.ModuleList(
            MixtralLayer(d, c["num_attention_heads"], c["num_key_value_heads"], c["intermediate_size"],
                         c["num_local_experts"], c["num_experts_per_tok"]) for _ in range(c["num_hidden_layers"]))
        self.norm = RmsNorm(d, c["rms_norm_eps"])
        self.lm_head = nn.Linear(d, c["vocab_size"], bias=False)

    def forward(self, tokens, targets):
        h, router_logits = self.embed_tokens(tokens), []
        for layer in self.layers:
            h, logits = layer(h)
            router_logits.append(logits)
        logits = self.lm_head(self.norm(h))
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))
        aux = load_balancing_loss(router_logits, self.c["num_local_experts"], self.c["num_experts_per_tok"])
        return loss + self.c["router_aux_loss_coef"] * aux


def read_weights(directory):
    """The directory's f32 tensors by name (safetensors read by hand: Debian packages none for Python)."""
    index = os.path.join(directory, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    out = {}
    for name in files:
        blob = open(os.path.join(directory, name), "rb").read()
        size = struct.unpack("<Q", blob[:8])[0]
        header = json.loads(blob[8:8 + size])
        for tensor, info in header.items():
            if tensor == "__metadata__":
                continue
            assert info["dtype"] == "F32", f"{tensor} is {info['dtype']}; bench_moe_step saves float32"
            start, end = info["data_offsets"]
            out[tensor] = torch.frombuffer(bytearray(blob[8 + size + start:8 + size + end]),
                                           dtype=torch.float32).view(info["shape"])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True, help="the Hugging Face directory bench_moe_step --save wrote")
    p.add_argument("--ids", required=True, help="a JSON array of token ids")
    peer_arguments(p)
    a = p.parse_args()
    set_up_torch(a)
    c = json.load(open(os.path.join(a.model, "config.json")))
    model = Mixtral(c)
    # transformers' names: model.layers.N.self_attn.q_proj -> layers.N.q_proj here.
    weights = {n.removeprefix("model.").replace(".self_attn.", "."): t for n, t in read_weights(a.model).items()}
    model.load_state_dict(weights, strict=True)
    b, t = 2, 512
    text = json.load(open(a.ids))
    ids = torch.tensor([text[r * (t + 1):(r + 1) * (t + 1)] for r in range(b)])
    tokens, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    losses = []

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        opt.step()
        losses.append(float(loss))
    ms = median_ms(1, a.steps, step)
    print(json.dumps({"impl": "pytorch " + torch.__version__, "threads": a.threads, "tokens": b * t,
                      "median_step_ms": ms, "per_second": b * t / ms * 1e3, "first_loss": losses[0],
                      "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "blas_build": a.blas + (" + flush_denormal" if a.flush_denormal else "")}))


if __name__ == "__main__":
    main()
