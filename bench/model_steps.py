"""The PyTorch peer of bench_model_steps: the same small CNN (forward,
backward, AdamW; on the same real Fashion-MNIST batches, --images) and the same Llama-style block (forward and backward: RMSNorm,
rotary embeddings, grouped-query causal attention, SwiGLU, as
examples/user_project/llama_block.hpp and Hugging Face's LlamaDecoderLayer
compute it), and a whole Llama-shaped model of those blocks (embeddings, 8
blocks, final norm, its own output projection; forward, loss, backward,
AdamW: as Hugging Face's LlamaForCausalLM computes it in PyTorch 1.13, which
has no fused attention), the same shapes and thread count; and a DPO step of
that model (a frozen reference scores two pairs of answers, the policy scores
them with gradients, DPO's sigmoid loss, backward, AdamW; only the answers'
positions reach the head, as bench_model_steps does), on the same token ids of
a real text (--ids). Prints one JSON object."""
import argparse
import gzip
import json
import math
import resource
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class SmallCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 16, 3, padding=1), nn.Conv2d(16, 32, 3, padding=1)
        self.head = nn.Linear(32 * 7 * 7, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.head(h.flatten(1))


class RmsNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    def __init__(self, dim, heads, kv_heads, hidden, theta=10000.0):
        super().__init__()
        self.heads, self.kv_heads, self.head, self.theta = heads, kv_heads, dim // heads, theta
        self.input_layernorm, self.post_attention_layernorm = RmsNorm(dim), RmsNorm(dim)
        self.q_proj = nn.Linear(dim, heads * self.head, bias=False)
        self.k_proj = nn.Linear(dim, kv_heads * self.head, bias=False)
        self.v_proj = nn.Linear(dim, kv_heads * self.head, bias=False)
        self.o_proj = nn.Linear(heads * self.head, dim, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)

    def rope(self, x):
        t, d = x.shape[2], self.head
        inv = 1.0 / (self.theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        emb = torch.cat((torch.outer(torch.arange(t, dtype=torch.float32), inv),) * 2, dim=-1)
        rotated = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
        return x * emb.cos() + rotated * emb.sin()

    def attend(self, x):
        """x plus attention over input_layernorm(x)."""
        b, t, _ = x.shape
        a = self.input_layernorm(x)
        q = self.rope(self.q_proj(a).view(b, t, self.heads, self.head).transpose(1, 2))
        k = self.rope(self.k_proj(a).view(b, t, self.kv_heads, self.head).transpose(1, 2))
        v = self.v_proj(a).view(b, t, self.kv_heads, self.head).transpose(1, 2)
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head)
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        return x + self.o_proj((scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, -1))

    def forward(self, x):
        h = self.attend(x)
        m = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(m)) * self.up_proj(m))


class Llama(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, hidden):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(LlamaBlock(dim, heads, kv_heads, hidden) for _ in range(layers))
        self.norm = RmsNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def hidden(self, tokens):
        h = self.embed_tokens(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.norm(h)

    def forward(self, tokens, targets):
        logits = self.lm_head(self.hidden(tokens))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    def sequence_logps(self, tokens, targets, mask):
        """Each row's summed log-probability of its targets where mask is true."""
        picked = self.hidden(tokens)[mask]
        logp = F.log_softmax(self.lm_head(picked).float(), dim=-1).gather(1, targets[mask].unsqueeze(1)).squeeze(1)
        rows = torch.arange(tokens.shape[0]).unsqueeze(1).expand_as(tokens)[mask]
        return torch.zeros(tokens.shape[0]).index_add(0, rows, logp)


def fashion_batches(directory, n, count):
    """count batches of n training images, batch k the images [k n, (k + 1) n), scaled as levers scales them
    (x / 255 - 0.5 in float32), with their labels."""
    with gzip.open(f"{directory}/train-images-idx3-ubyte.gz") as f:
        images = torch.frombuffer(bytearray(f.read()[16:]), dtype=torch.uint8).view(-1, 1, 28, 28)
    with gzip.open(f"{directory}/train-labels-idx1-ubyte.gz") as f:
        labels = torch.frombuffer(bytearray(f.read()[8:]), dtype=torch.uint8).long()
    starts = [k * n % (len(images) - n + 1) for k in range(count)]
    return [(images[s:s + n].float() / 255.0 - 0.5, labels[s:s + n]) for s in starts]


def median_ms(warmup, steps, step):
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        step()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    times.sort()
    return times[len(times) // 2]


def peer_arguments(p):
    """The arguments every PyTorch peer takes: its threads, timed steps and the BLAS build's label."""
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--blas", default="system", help="label for the BLAS build in use")
    p.add_argument("--flush-denormal", type=int, default=0, choices=[0, 1])


def set_up_torch(a):
    """PyTorch on a.threads threads, flushing subnormals where a.flush_denormal."""
    torch.set_num_threads(a.threads)
    if a.flush_denormal:
        torch.set_flush_denormal(True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["cnn", "llama_block", "llama", "dpo"], default="cnn")
    p.add_argument("--ids", help="llama, dpo: a JSON array of token ids (llama without it: synthetic ids)")
    p.add_argument("--images", default="/usr/share/datasets/fashion-mnist", help="cnn: Fashion-MNIST's IDX files")
    p.add_argument("--batch", type=int, default=0)
    peer_arguments(p)
    a = p.parse_args()
    set_up_torch(a)
    torch.manual_seed(1)
    row = {"impl": "pytorch " + torch.__version__, "model": a.model, "threads": a.threads}
    if a.model == "cnn":
        n = a.batch or 64
        model = SmallCnn()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batches = iter(fashion_batches(a.images, n, 3 + a.steps))

        def step():
            x, y = next(batches)
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        ms = median_ms(3, a.steps, step)
        row.update({"batch": n, "median_step_ms": ms, "per_second": n / ms * 1e3, "unit": "images"})
    elif a.model == "llama":
        b, t = a.batch or 2, 512
        model = Llama(32000, 512, 8, 8, 2, 1376)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if a.ids:  # the text's first b (t + 1) ids, row by row, as bench_model_steps takes them
            ids = torch.tensor(json.load(open(a.ids))[:b * (t + 1)])
        else:
            ids = (torch.arange(b * (t + 1)) * 7919 + 13) % 32000
        ids = ids.view(b, t + 1)
        tokens, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

        def step():
            opt.zero_grad(set_to_none=True)
            model(tokens, targets).backward()
            opt.step()
        ms = median_ms(2, a.steps, step)
        row.update({"batch": b, "tokens": b * t, "median_step_ms": ms, "per_second": b * t / ms * 1e3, "unit": "tokens",
                    "parameters": sum(p.numel() for p in model.parameters()), "inputs": "text" if a.ids else "synthetic"})
    elif a.model == "dpo":
        text = json.load(open(a.ids))
        pairs, prompt, answer = a.batch or 2, 256, 257
        t = prompt + answer - 1
        rows = []  # chosen then rejected of each pair, as bench_model_steps lays them out
        for k in range(pairs):
            at = k * 1024
            for start in (prompt, prompt + 400):
                rows.append(text[at:at + prompt] + text[at + start:at + start + answer])
        ids = torch.tensor(rows)
        tokens, targets = ids[:, :-1].contiguous(), ids[:, 1:].contiguous()
        mask = torch.arange(t).unsqueeze(0).expand(len(rows), t) >= prompt - 1
        model, reference = Llama(32000, 512, 8, 8, 2, 1376), Llama(32000, 512, 8, 8, 2, 1376)
        reference.load_state_dict(model.state_dict())
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            opt.zero_grad(set_to_none=True)
            with torch.no_grad():
                ref = reference.sequence_logps(tokens, targets, mask)
            pol = model.sequence_logps(tokens, targets, mask)
            z = (pol[0::2] - pol[1::2]) - (ref[0::2] - ref[1::2])
            loss = -F.logsigmoid(0.1 * z).mean()
            loss.backward()
            opt.step()
        ms = median_ms(2, a.steps, step)
        n = 2 * pairs * t
        row.update({"batch": pairs, "tokens": n, "median_step_ms": ms, "per_second": n / ms * 1e3, "unit": "tokens",
                    "parameters": sum(p.numel() for p in model.parameters())})
    else:
        b, t = a.batch or 4, 256
        model = LlamaBlock(512, 8, 2, 1376)
        x, probe = torch.randn(b, t, 512, requires_grad=True), torch.randn(b, t, 512)

        def step():
            model.zero_grad(set_to_none=True)
            x.grad = None
            (model(x) * probe).sum().backward()
        ms = median_ms(3, a.steps, step)
        row.update({"batch": b, "tokens": b * t, "median_step_ms": ms, "per_second": b * t / ms * 1e3, "unit": "tokens"})
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    row["blas"] = [line.strip() for line in torch.__config__.show().splitlines() if "BLAS" in line]
    row["blas_build"] = a.blas + (" + flush_denormal" if a.flush_denormal else "")
    print(json.dumps(row))


if __name__ == "__main__":
    main()
