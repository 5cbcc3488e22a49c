"""The PyTorch peer for bench_gpt_step: the same GPT-2-style model, batch and
thread count, one training step = forward, backward, clipping, AdamW.
Prints one JSON object, plus how this PyTorch was built (BLAS) and a matmul
GFLOP/s figure so a crippled install is visible."""
import argparse
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, heads, sdpa):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if self.sdpa:  # PyTorch's fused attention (flash where the GPU has it), as nanoGPT uses it
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, c))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self.c_proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, vocab, block, layers, heads, c, sdpa=False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
        self.blocks = nn.ModuleList(Block(c, heads, sdpa) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        # GPT-2's initialisation, as levers' Gpt: matrices and embeddings N(0, 0.02), biases zero (PyTorch's
        # default N(0, 1) embeddings, tied to the head, start at a loss near 80 with saturated softmaxes).
        for name, w in self.named_parameters():
            if w.dim() >= 2:
                nn.init.normal_(w, std=0.02)
            elif name.endswith("bias") and "ln" not in name:
                nn.init.zeros_(w)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.wte(idx) + self.wpe(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output projection
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def matmul_gflops():
    a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
    a @ b
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    return 10 * 2 * 1024**3 / (time.perf_counter() - start) / 1e9


def add_model_args(p):
    """The GPT's shape and batch, as levers' pretrain defaults have them."""
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--block", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--embd", type=int, default=128)
    p.add_argument("--vocab", type=int, default=256)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    add_model_args(p)
    p.add_argument("--blas", default="system", help="label for the BLAS build in use")
    p.add_argument("--ids", help="a JSON array of token ids of a real text (default: random ids)")
    p.add_argument("--device", default="cpu", help="cpu, or cuda for the GPU comparison in gpu_check.sh")
    p.add_argument("--precision", default="f32", choices=["f32", "bf16"],
                   help="bf16: autocast to bf16 around forward (f32 master weights), as PyTorch users train")
    p.add_argument("--attention", default="explicit", choices=["explicit", "sdpa"],
                   help="explicit: softmax(QKᵀ)V as levers computes it; sdpa: F.scaled_dot_product_attention")
    p.add_argument("--flush-denormal", type=int, default=0, choices=[0, 1],
                   help="1: torch.set_flush_denormal(True), subnormal floats as zero (levers' CPU threads do this)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)
    torch.manual_seed(1)
    model = Gpt(a.vocab, a.block, a.layers, a.heads, a.embd, a.attention == "sdpa").to(a.device)
    autocast = torch.autocast(device_type=a.device, dtype=torch.bfloat16, enabled=a.precision == "bf16")
    decay = [w for w in model.parameters() if w.dim() >= 2]
    no_decay = [w for w in model.parameters() if w.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    if a.ids:  # row r: the text's ids [r (block + 1), (r + 1)(block + 1)), as bench_gpt_step takes them
        rows = torch.tensor(json.load(open(a.ids))[:a.batch * (a.block + 1)]).view(a.batch, a.block + 1).to(a.device)
        x, y = rows[:, :-1].contiguous(), rows[:, 1:].contiguous()
    else:
        x = torch.randint(0, a.vocab, (a.batch, a.block), device=a.device)
        y = torch.randint(0, a.vocab, (a.batch, a.block), device=a.device)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    times = []
    for step in range(a.warmup + a.steps):
        sync()
        start = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        if step >= a.warmup:
            times.append(time.perf_counter() - start)
    times.sort()
    median = times[len(times) // 2]
    blas = [line.strip() for line in torch.__config__.show().splitlines() if "BLAS" in line]
    print(json.dumps({
        "impl": "pytorch " + torch.__version__,
        "precision": a.precision,
        "attention": a.attention,
        "threads": a.threads,
        "parameters": sum(w.numel() for w in model.parameters()),
        "tokens_per_step": a.batch * a.block,
        "inputs": "text" if a.ids else "random",
        "median_step_ms": median * 1e3,
        "tokens_per_second": a.batch * a.block / median,
        "final_loss": loss.item(),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "matmul_gflops_1024": matmul_gflops(),
        "blas": blas,
        "blas_build": a.blas + (" + flush_denormal" if a.flush_denormal else ""),
    }))


if __name__ == "__main__":
    main()
