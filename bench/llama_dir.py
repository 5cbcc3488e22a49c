#!/usr/bin/env python3
"""A Llama model with random weights as a Hugging Face directory, for the
benchmarks that run a recipe on one (bench/emulated_llama_step.sh):
config.json and model.safetensors (float32, or bfloat16 with --dtype
bf16), tied output embeddings, the tokenizer files of TOKENIZER_DIR copied
beside them; --model-type qwen3 adds Qwen 3's per-head q and k norms,
smollm3 makes a SmolLM3 (every fourth layer without rope), gemma2 and
gemma3_text a Gemma (sandwich norms stored as weight - 1, soft caps, a
sliding window of a quarter of the context on every other layer, Gemma
3's local rope base and linear scaling), phi3 a Phi-4-mini-like Phi-3 (fused qkv and
gate-up, three quarters of each head rotated, longrope past a quarter of the
context).
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
    p.add_argument("--model-type", choices=("llama", "qwen3", "smollm3", "gemma2", "gemma3_text", "phi3"),
                   default="llama")
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
    gemma = a.model_type in ("gemma2", "gemma3_text")
    if gemma:  # query scale head_dim^-1/2: what llama.cpp uses below the 27B's layer count
        config.update({"architectures": ["Gemma2ForCausalLM" if a.model_type == "gemma2" else "Gemma3ForCausalLM"],
                       "model_type": a.model_type, "head_dim": head_dim, "query_pre_attn_scalar": head_dim,
                       "hidden_activation": "gelu_pytorch_tanh", "rms_norm_eps": 1e-6,
                       "sliding_window": a.context // 4, "final_logit_softcapping": 30.0})
        del config["hidden_act"]
    if a.model_type == "gemma2":
        config["attn_logit_softcapping"] = 50.0
    if a.model_type == "gemma3_text":  # every other layer global: a pattern other than llama.cpp's default 6
        config.update({"rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window_pattern": 2,
                       "rope_scaling": {"rope_type": "linear", "factor": 8.0}})
    if a.model_type == "phi3":  # long factors past a quarter of the context, as a long prompt runs
        rotary = head_dim * 3 // 4
        rope_rng = random.Random(2)
        config.update({"architectures": ["Phi3ForCausalLM"], "model_type": "phi3", "partial_rotary_factor": 0.75,
                       "sliding_window": 4 * a.context, "original_max_position_embeddings": a.context // 4,
                       "rope_scaling": {"type": "longrope",
                                        "short_factor": [round(rope_rng.uniform(1, 2), 4) for _ in range(rotary // 2)],
                                        "long_factor": [round(rope_rng.uniform(1, 8), 4) for _ in range(rotary // 2)]}})
    shapes = {"model.embed_tokens.weight": [a.vocab, a.hidden], "model.norm.weight": [a.hidden]}
    for i in range(a.layers):
        layer = f"model.layers.{i}."
        q, kv = a.heads * head_dim, a.kv_heads * head_dim
        if a.model_type == "phi3":  # q, k and v one product, gate and up another
            attention = {"self_attn.qkv_proj.weight": [q + 2 * kv, a.hidden]}
            mlp = {"mlp.gate_up_proj.weight": [2 * a.intermediate, a.hidden]}
        else:
            attention = {"self_attn.q_proj.weight": [q, a.hidden], "self_attn.k_proj.weight": [kv, a.hidden],
                         "self_attn.v_proj.weight": [kv, a.hidden]}
            mlp = {"mlp.gate_proj.weight": [a.intermediate, a.hidden], "mlp.up_proj.weight": [a.intermediate, a.hidden]}
        parts = {"input_layernorm.weight": [a.hidden], "post_attention_layernorm.weight": [a.hidden], **attention,
                 "self_attn.o_proj.weight": [a.hidden, q], **mlp, "mlp.down_proj.weight": [a.hidden, a.intermediate]}
        shapes.update({layer + name: shape for name, shape in parts.items()})
        if gemma:
            shapes.update({layer + "pre_feedforward_layernorm.weight": [a.hidden],
                           layer + "post_feedforward_layernorm.weight": [a.hidden]})
        if a.model_type in ("qwen3", "gemma3_text"):
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
            if name.endswith("norm.weight"):  # Gemma's scale 1 + weight about 1, as the others' weight
                values = array.array("f", (rng.gauss(0, 0.1) for _ in range(block)) if gemma else [1.0] * block)
            else:
                values = array.array("f", (rng.gauss(0, 0.02) for _ in range(block)))
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
