#!/usr/bin/env python3
"""The reference for tests/unit/kernels/test_quant4.cpp: bitsandbytes' 4-bit
blockwise quantization (NF4 and FP4, blocks of 64, two codes a byte high
nibble first; with double quantization the blocks' absmax less their mean,
quantized to 8 bits with the signed dynamic map in blocks of 256) written
out with PyTorch from its definition, applied to fixed inputs the test makes
the same way. Writes the code books, the codes, the scales and the
dequantized values (the first 256, and the CRC-32 of all of them as f32
little-endian bytes) as JSON.

    python3 tests/reference/quant4.py > tests/reference/quant4.json

Needs PyTorch (Debian's python3-torch); the JSON it wrote is committed, so
the test runs without it.
"""
import json
import sys
import zlib

import torch

NF4 = [-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
       -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
       0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0]
FP4_RAW = [0, 0.0625, 8.0, 12.0, 4.0, 6.0, 2.0, 3.0, 0, -0.0625, -8.0, -12.0, -4.0, -6.0, -2.0, -3.0]


def code4(kind):
    t = torch.tensor(NF4 if kind == "nf4" else FP4_RAW, dtype=torch.float32)
    return t / t.abs().max()


def dynamic_map():
    # The signed dynamic map: for exponents 10^-6 .. 10^0, the means of a
    # linear split of [0.1, 1] (2^(i) + 1 points for exponent i), both signs,
    # then 0 and 1; 256 values sorted.
    data = []
    for i in range(7):
        bounds = torch.linspace(0.1, 1, 2 ** i + 1, dtype=torch.float32)
        means = (bounds[:-1] + bounds[1:]) / 2.0
        data += ((10 ** (-6 + i)) * means).tolist()
        data += (-(10 ** (-6 + i)) * means).tolist()
    data += [0, 1.0]
    assert len(data) == 256
    data.sort()
    return torch.tensor(data, dtype=torch.float32)


def scale_blocks(x, blocksize):
    n = x.numel()
    full = n - n % blocksize
    body = x[:full].reshape(-1, blocksize)
    absmax = body.abs().max(dim=-1)[0]
    scaled = torch.clamp(body * (1.0 / absmax.clamp(min=1e-38).view(-1, 1)), -1, 1).reshape(-1)
    if n > full:
        am = x[full:].abs().max().clamp(min=1e-38)
        absmax = torch.cat([absmax, am.unsqueeze(0)])  # the tail's clamped, as bitsandbytes keeps it
        scaled = torch.cat([scaled, torch.clamp(x[full:] / am, -1, 1)])
    return scaled, absmax


def quantize_blockwise(x, code, blocksize):
    scaled, absmax = scale_blocks(x, blocksize)
    return torch.bucketize(scaled, (code[:-1] + code[1:]) / 2), absmax


def dequantize_blockwise(q, absmax, code, blocksize):
    out = code[q]
    return out * absmax.repeat_interleave(blocksize)[: q.numel()]


def inputs(n):
    # Values the test makes alike: v = k / 2046 (k a fixed scramble of i), times a block's scale (1..7)/8;
    # block 3 all zeros.
    i = torch.arange(n, dtype=torch.int64)
    k = (i * 2654435761) % 4093 - 2046
    v = k.to(torch.float32) / 2046.0
    scale = ((i // 64) % 7 + 1).to(torch.float32) / 8.0
    x = v * scale
    x[3 * 64: 4 * 64] = 0
    return x


def hexbytes(t):
    return bytes(t.to(torch.uint8).tolist()).hex()


def case(kind, n, double_quant):
    code = code4(kind)
    order = torch.argsort(code, stable=True)
    x = inputs(n)
    scaled, absmax = scale_blocks(x, 64)
    q = order[torch.bucketize(scaled, (code[order[:-1]] + code[order[1:]]) / 2)]
    if q.numel() % 2:
        q = torch.cat([q, torch.zeros(1, dtype=q.dtype)])
    packed = (q[0::2] << 4) | q[1::2]
    out = {"type": kind, "n": n, "double_quant": double_quant, "codes": hexbytes(packed)}
    scales = absmax
    if double_quant:
        dyn = dynamic_map()
        offset = absmax.mean()
        aq, nested = quantize_blockwise(absmax - offset, dyn, 256)
        scales = dequantize_blockwise(aq, nested, dyn, 256) + offset
        out.update(absmax_codes=hexbytes(aq), nested_absmax=nested.tolist(), offset=offset.item(),
                   absmax=scales.tolist())
    else:
        out["absmax"] = absmax.tolist()
    values = code[q[:n]] * scales.repeat_interleave(64)[:n]
    out["values_head"] = values[:256].tolist()
    out["values_crc32"] = zlib.crc32(values.numpy().astype("<f4").tobytes())
    return out


def quantize4(x, kind, double_quant):
    """bitsandbytes' quantize_4bit of f32 values x (flattened), blocks of 64: the packed codes (uint8), and the
    absmax (f32), or with double quantization their codes (uint8), the nested absmax (f32) and the offset."""
    code = code4(kind)
    order = torch.argsort(code, stable=True)
    scaled, absmax = scale_blocks(x.reshape(-1), 64)
    q = order[torch.bucketize(scaled, (code[order[:-1]] + code[order[1:]]) / 2)]
    if q.numel() % 2:
        q = torch.cat([q, torch.zeros(1, dtype=q.dtype)])
    packed = ((q[0::2] << 4) | q[1::2]).to(torch.uint8)
    if not double_quant:
        return packed, absmax, None
    offset = absmax.mean()
    aq, nested = quantize_blockwise(absmax - offset, dynamic_map(), 256)
    return packed, aq.to(torch.uint8), (nested, offset)


if __name__ == "__main__":
    json.dump({"nf4": code4("nf4").tolist(), "fp4": code4("fp4").tolist(),
               "fp4_order": torch.argsort(code4("fp4"), stable=True).tolist(), "dynamic": dynamic_map().tolist(),
               "cases": [case(k, n, d) for k in ("nf4", "fp4") for n in (201, 16744) for d in (False, True)]},
              sys.stdout, indent=0)
    sys.stdout.write("\n")
