#!/usr/bin/env python3
"""Writes the 1B-class model the prefix-cache benchmarks serve (scripts/bench-prefix-cache.sh).

Usage: make-bench-1b.py DIR

A Hugging Face Llama directory of TinyLlama 1.1B's shape (22 layers, hidden 2048, 32 heads on 4 kv
heads, intermediate 5632) with random bf16 weights (normal, standard deviation 0.02; norms 1),
whose vocabulary is that of the 512-token tokenizer it gets (tests/fixtures/tokenizers/llama_spm),
so that every token a reply samples is text: 0.97 billion parameters, 1.9 GiB. With the chat
template of models/stories260K. Needs numpy only (tools/venv or any Python with numpy).
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main(directory):
    os.makedirs(directory, exist_ok=True)
    vocab, dim, hidden, layers, heads, kv_heads = 512, 2048, 5632, 22, 32, 4
    head_dim = dim // heads
    shapes = {"model.embed_tokens.weight": (vocab, dim)}
    for i in range(layers):
        p = f"model.layers.{i}."
        shapes[p + "self_attn.q_proj.weight"] = (dim, dim)
        shapes[p + "self_attn.k_proj.weight"] = (kv_heads * head_dim, dim)
        shapes[p + "self_attn.v_proj.weight"] = (kv_heads * head_dim, dim)
        shapes[p + "self_attn.o_proj.weight"] = (dim, dim)
        shapes[p + "mlp.gate_proj.weight"] = (hidden, dim)
        shapes[p + "mlp.up_proj.weight"] = (hidden, dim)
        shapes[p + "mlp.down_proj.weight"] = (dim, hidden)
        shapes[p + "input_layernorm.weight"] = (dim,)
        shapes[p + "post_attention_layernorm.weight"] = (dim,)
    shapes["model.norm.weight"] = (dim,)
    shapes["lm_head.weight"] = (vocab, dim)
    header, offset = {}, 0
    for name, shape in shapes.items():
        size = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape),
                        "data_offsets": [offset, offset + size]}
        offset += size
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    rng = np.random.default_rng(0)
    with open(os.path.join(directory, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, shape in shapes.items():
            if name.endswith("norm.weight"):
                f.write(np.full(shape, 0x3F80, dtype=np.uint16).tobytes())  # 1.0
                continue
            bits = (rng.standard_normal(shape, dtype=np.float32) * 0.02).view(np.uint32)
            # float32 to bfloat16, rounded to nearest even.
            f.write(((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes())
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
              "vocab_size": vocab, "hidden_size": dim, "intermediate_size": hidden,
              "num_hidden_layers": layers, "num_attention_heads": heads,
              "num_key_value_heads": kv_heads, "max_position_embeddings": 2048,
              "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
              "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16",
              "hidden_act": "silu"}
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    tokenizer = os.path.join(ROOT, "tests", "fixtures", "tokenizers", "llama_spm")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokenizer, name), directory)
    shutil.copy(os.path.join(ROOT, "models", "stories260K", "chat_template.jinja"), directory)
    print(f"{directory}: {sum(int(np.prod(s)) for s in shapes.values())} parameters")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(1)
    sys.exit(main(sys.argv[1]))
