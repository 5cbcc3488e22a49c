#!/usr/bin/env python3
"""A Llama model with random weights as a Hugging Face directory, for the
benchmarks that run a recipe on one (bench/emulated_llama_step.sh):
config.json and model.safetensors (float32, or bfloat16 with --dtype
bf16), tied output embeddings, the tokenizer files of TOKENIZER_DIR copied
beside them; --model-type qwen3 adds Qwen 3's per-head q and k norms,
--model-type smollm3 makes a SmolLM3 (every fourth layer without rope).
Python's standard library only: a tensor of more than 2^20 values repeats
one random block of that many, so a 1B-parameter shape takes seconds.

    llama_dir.py OUT TOKENIZER_DIR --vocab 32000 --hidden 128 --layers 2 \
        --heads 2 --kv-heads 1 --intermediate 352 --context 128
"""
import argparse
import array
import json
import pathlib
import random
import shutil
import struct


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out", type=pathlib.Path)
    p.add_argument("tokenizer_dir", type=pathlib.Path)
    for name, default in (("vocab", 32000), ("hidden", 128), ("layers", 2), ("heads", 2), ("kv-heads", 1),
                          ("intermediate", 352), ("context", 128)):
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--model-type", choices=("llama", "qwen3", "smollm3"), default="llama")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    a = p.parse_args()
    head_dim = a.hidden // a.heads
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": a.vocab,
        "hidden_size": a.hidden, "intermediate_size": a.intermediate, "num_hidden_layers": a.layers,
        "num_attention_heads": a.heads, "num_key_value_heads": a.kv_heads, "max_position_embeddings": a.context,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": True, "hidden_act": "silu",
        "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "float32" if a.dtype == "f32" else "bfloat16",
    }
    if a.model_type == "qwen3":
        config.update({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": head_dim,
                       "rms_norm_eps": 1e-6, "rope_theta": 1000000.0})
    if a.model_type == "smollm3":  # every fourth layer without rope, as SmolLM3-3B
        config.update({"architectures": ["SmolLM3ForCausalLM"], "model_type": "smollm3", "no_rope_layer_interval": 4,
                       "rope_theta": 2000000.0, "rms_norm_eps": 1e-6})
    shapes = {"model.embed_tokens.weight": [a.vocab, a.hidden], "model.norm.weight": [a.hidden]}
    for i in range(a.layers):
        layer = f"model.layers.{i}."
        shapes.update({
            layer + "input_layernorm.weight": [a.hidden],
            layer + "post_attention_layernorm.weight": [a.hidden],
            layer + "self_attn.q_proj.weight": [a.heads * head_dim, a.hidden],
            layer + "self_attn.k_proj.weight": [a.kv_heads * head_dim, a.hidden],
            layer + "self_attn.v_proj.weight": [a.kv_heads * head_dim, a.hidden],
            layer + "self_attn.o_proj.weight": [a.hidden, a.heads * head_dim],
            layer + "mlp.gate_proj.weight": [a.intermediate, a.hidden],
            layer + "mlp.up_proj.weight": [a.intermediate, a.hidden],
            layer + "mlp.down_proj.weight": [a.hidden, a.intermediate],
        })
        if a.model_type == "qwen3":
            shapes.update({layer + "self_attn.q_norm.weight": [head_dim], layer + "self_attn.k_norm.weight": [head_dim]})
    rng = random.Random(1)
    width = 4 if a.dtype == "f32" else 2
    header, offset = {}, 0
    for name, shape in shapes.items():
        n = 1
        for s in shape:
            n *= s
        header[name] = {"dtype": "F32" if a.dtype == "f32" else "BF16", "shape": shape,
                        "data_offsets": [offset, offset + n * width]}
        offset += n * width
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in shapes.items():  # written as declared, one tensor in memory at a time
            n = header[name]["data_offsets"][1] // width - header[name]["data_offsets"][0] // width
            block = min(n, 1 << 20)
            values = array.array("f", [1.0] * block if name.endswith("norm.weight") else
                                 (rng.gauss(0, 0.02) for _ in range(block)))
            if a.dtype == "bf16":  # an f32's high half (truncated)
                halves = array.array("H")
                halves.frombytes(values.tobytes())
                values = halves[1::2]
            blob = values.tobytes()  # little-endian on the machines levers runs on
            for _ in range(n // block):
                f.write(blob)
            f.write(blob[:(n % block) * width])
    (a.out / "config.json").write_text(json.dumps(config, indent=2))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(a.tokenizer_dir / name, a.out / name)


if __name__ == "__main__":
    main()
