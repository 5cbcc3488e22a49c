#!/usr/bin/env python3
"""The fixture of tests/unit/models/test_qlora.cpp: a tiny Llama (one layer of
32, its own lm_head) saved as transformers saves one, in full precision
(tests/fixtures/tiny_bnb/f32) and as transformers saves it loaded with
bitsandbytes' 4-bit quantization: NF4 with double quantization
(tests/fixtures/tiny_bnb/nf4) and FP4 without (tests/fixtures/tiny_bnb/fp4).
Each projection's weight is stored as its packed codes (uint8 [n/2, 1])
beside weight.absmax, weight.quant_map, weight.nested_absmax,
weight.nested_quant_map and weight.quant_state.bitsandbytes__<type> (the JSON
of its quant state as bytes); embeddings, norms and lm_head as they are.
The codes come from bitsandbytes' definition written out in quant4.py; the
safetensors files are written here byte by byte.

    python3 tests/reference/bnb_tiny.py

Needs PyTorch (Debian's python3-torch); the files it wrote are committed.
"""
import json
import pathlib
import struct

import torch

from quant4 import code4, dynamic_map, quantize4

ROOT = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "tiny_bnb"
VOCAB, DIM, HIDDEN, HEADS, KV_HEADS = 40, 32, 48, 4, 2
HEAD = DIM // HEADS
CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": DIM,
          "intermediate_size": HIDDEN, "num_hidden_layers": 1, "num_attention_heads": HEADS,
          "num_key_value_heads": KV_HEADS, "hidden_act": "silu", "max_position_embeddings": 64,
          "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "tie_word_embeddings": False, "torch_dtype": "float32"}
PROJECTIONS = {"self_attn.q_proj": [HEADS * HEAD, DIM], "self_attn.k_proj": [KV_HEADS * HEAD, DIM],
               "self_attn.v_proj": [KV_HEADS * HEAD, DIM], "self_attn.o_proj": [DIM, HEADS * HEAD],
               "mlp.gate_proj": [HIDDEN, DIM], "mlp.up_proj": [HIDDEN, DIM], "mlp.down_proj": [DIM, HIDDEN]}

torch.manual_seed(0)
weights = {"model.embed_tokens.weight": 0.5 * torch.randn(VOCAB, DIM),
           "model.layers.0.input_layernorm.weight": 1 + 0.1 * torch.randn(DIM),
           "model.layers.0.post_attention_layernorm.weight": 1 + 0.1 * torch.randn(DIM)}
for name, shape in PROJECTIONS.items():
    weights[f"model.layers.0.{name}.weight"] = 0.2 * torch.randn(*shape)
weights["model.norm.weight"] = 1 + 0.1 * torch.randn(DIM)
weights["lm_head.weight"] = 0.5 * torch.randn(VOCAB, DIM)


def write_safetensors(path, tensors):
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in tensors.items():
        dtype = {torch.float32: "F32", torch.uint8: "U8"}[t.dtype]
        data = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save(directory, tensors, config):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    write_safetensors(directory / "model.safetensors", tensors)


save(ROOT / "f32", weights, CONFIG)
for kind, double_quant in (("nf4", True), ("fp4", False)):
    tensors = {}
    for name, w in weights.items():
        if not any(name == f"model.layers.0.{p}.weight" for p in PROJECTIONS):
            tensors[name] = w
            continue
        packed, absmax, nested = quantize4(w, kind, double_quant)
        state = {"quant_type": kind, "blocksize": 64, "dtype": "float32", "shape": list(w.shape)}
        tensors[name] = packed.reshape(-1, 1)
        tensors[name + ".absmax"] = absmax
        tensors[name + ".quant_map"] = code4(kind)
        if nested is not None:
            tensors[name + ".nested_absmax"] = nested[0]
            tensors[name + ".nested_quant_map"] = dynamic_map()
            state.update(nested_blocksize=256, nested_dtype="float32", nested_offset=nested[1].item())
        tensors[name + f".quant_state.bitsandbytes__{kind}"] = torch.tensor(list(json.dumps(state).encode()),
                                                                              dtype=torch.uint8)
    config = dict(CONFIG, quantization_config={
        "quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": False, "bnb_4bit_quant_type": kind,
        "bnb_4bit_use_double_quant": double_quant, "bnb_4bit_compute_dtype": "float32",
        "bnb_4bit_quant_storage": "uint8", "llm_int8_skip_modules": None})
    save(ROOT / kind, tensors, config)
