#!/usr/bin/env python3
"""The reference for tests/unit/nn/test_sparse_moe.cpp: a sparse mixture of
experts as transformers' Qwen3MoeSparseMoeBlock and MixtralSparseMoeBlock
compute it (the router's softmax, the top k experts per token, their weights
renormalised where norm_topk_prob, each expert's SwiGLU MLP over the tokens
routed to it, added back with index_add_), written with PyTorch in float64
(the softmax too, which transformers takes in float32) with random weights
and input. Writes the weights, the input, a probe r, the output, the router
logits, the experts each token went to, the loss sum(block(x) * r) and every
gradient as JSON, with and without norm_topk_prob.

    python3 tests/reference/moe_block.py > tests/reference/moe_block.json

Needs PyTorch (Debian's python3-torch); the JSON it wrote is committed.
"""
import json
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
DIM, HIDDEN, EXPERTS, TOP_K, BATCH, TIME = 8, 12, 4, 2, 2, 5


def case(norm_topk_prob, seed):
    torch.manual_seed(seed)
    w = {"gate.weight": 0.5 * torch.randn(EXPERTS, DIM)}
    for e in range(EXPERTS):
        w[f"experts.{e}.gate_proj.weight"] = 0.3 * torch.randn(HIDDEN, DIM)
        w[f"experts.{e}.up_proj.weight"] = 0.3 * torch.randn(HIDDEN, DIM)
        w[f"experts.{e}.down_proj.weight"] = 0.3 * torch.randn(DIM, HIDDEN)
    for t in w.values():
        t.requires_grad_()
    x = torch.randn(BATCH, TIME, DIM, requires_grad=True)
    r = torch.randn(BATCH, TIME, DIM)

    h = x.view(-1, DIM)
    router_logits = h @ w["gate.weight"].T
    routing = F.softmax(router_logits, dim=1)
    routing, selected = torch.topk(routing, TOP_K, dim=-1)
    if norm_topk_prob:
        routing = routing / routing.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(h)
    mask = F.one_hot(selected, num_classes=EXPERTS).permute(2, 1, 0)
    for e in range(EXPERTS):
        slot, token = torch.where(mask[e])
        if token.numel() == 0:
            continue
        state = h[token]
        g = state @ w[f"experts.{e}.gate_proj.weight"].T
        u = state @ w[f"experts.{e}.up_proj.weight"].T
        y = (F.silu(g) * u) @ w[f"experts.{e}.down_proj.weight"].T
        out.index_add_(0, token, y * routing[token, slot, None])
    out = out.view(BATCH, TIME, DIM)
    loss = (out * r).sum()
    loss.backward()
    flat = lambda t: t.detach().reshape(-1).tolist()
    return {"norm_topk_prob": norm_topk_prob, "weights": {k: flat(v) for k, v in w.items()},
            "shapes": {k: list(v.shape) for k, v in w.items()}, "x": flat(x), "r": flat(r), "out": flat(out),
            "router_logits": flat(router_logits), "selected": selected.reshape(-1).tolist(), "loss": loss.item(),
            "grads": {k: flat(v.grad) for k, v in w.items()}, "x_grad": flat(x.grad)}


json.dump({"dim": DIM, "hidden": HIDDEN, "experts": EXPERTS, "top_k": TOP_K, "batch": BATCH, "time": TIME,
           "cases": [case(True, 0), case(False, 1)]}, sys.stdout)
sys.stdout.write("\n")
