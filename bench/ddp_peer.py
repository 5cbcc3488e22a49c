"""The PyTorch DDP peer for bench/ddp_peer.sh: the GPT of gpt_step.py trained
with DistributedDataParallel over gloo on CPU ranks started by torchrun, each
rank its own batch. Rank 0 prints one JSON object: tokens/s of the whole job
over the steps after the warm-up."""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from gpt_step import Gpt, add_model_args


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=10)
    add_model_args(p)
    a = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1)
    model = DistributedDataParallel(Gpt(a.vocab, a.block, a.layers, a.heads, a.embd))
    decay = [w for w in model.parameters() if w.dim() >= 2]
    no_decay = [w for w in model.parameters() if w.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=2e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(100 + rank)
    for step in range(a.warmup + a.steps):
        if step == a.warmup:
            dist.barrier()
            start = time.perf_counter()
        x = torch.randint(0, a.vocab, (a.batch, a.block), generator=gen)
        y = torch.randint(0, a.vocab, (a.batch, a.block), generator=gen)
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    dist.barrier()
    seconds = time.perf_counter() - start
    if rank == 0:
        print(json.dumps({"impl": "pytorch " + torch.__version__ + " DDP gloo", "ranks": world,
                          "tokens_per_second": world * a.steps * a.batch * a.block / seconds}))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
