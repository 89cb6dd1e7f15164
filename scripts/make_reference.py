#!/usr/bin/env python3
"""Writes the Hugging Face reference fixtures that tests/executor/hf_reference_test.cc compares
against: small random Llama models saved by transformers itself, and the logits transformers'
LlamaForCausalLM computes for a few prompts at every position, in fp32.

(Qwen2 and Qwen3 folders: scripts/fixtures/family_fixtures.py.)

CI only reads the fixtures; regenerating them needs torch and transformers:
    python3 -m venv .venv && .venv/bin/pip install torch transformers safetensors
    .venv/bin/python scripts/make_reference.py
"""
import json
import math
import os
import sys

import torch
from transformers import LlamaConfig, LlamaForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hf")

MODELS = {
    # GQA (4 query heads over 2 KV heads), untied lm_head, saved in shards with an index.
    "gqa_untied_sharded": dict(
        config=dict(vocab_size=96, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, rope_theta=10000.0,
                    tie_word_embeddings=False, rms_norm_eps=1e-6),
        dtype=torch.float32, max_shard_size="60KB"),
    # Multi-head attention with tied embeddings (no lm_head.weight in the file).
    "mha_tied": dict(
        config=dict(vocab_size=80, hidden_size=48, intermediate_size=96, num_hidden_layers=2,
                    num_attention_heads=3, num_key_value_heads=3, rope_theta=10000.0,
                    tie_word_embeddings=True, rms_norm_eps=1e-5),
        dtype=torch.float32, max_shard_size=None),
    # bf16 checkpoint, head_dim set apart from hidden/heads, Llama 3 rope scaling.
    "llama3_bf16": dict(
        config=dict(vocab_size=112, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                    num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                    rope_theta=500000.0, tie_word_embeddings=False, rms_norm_eps=1e-5,
                    max_position_embeddings=256,
                    rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                      high_freq_factor=4.0, original_max_position_embeddings=64)),
        dtype=torch.bfloat16, max_shard_size=None),
}

PROMPT_LENGTHS = [1, 7, 19, 33]


def randomize(model, generator):
    """Weights on the scale convoy-mkmodel uses, so that logits are far from flat."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=generator))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=generator))
            else:
                p.copy_(torch.randn(p.shape, generator=generator) / math.sqrt(p.shape[1]))


def main():
    torch.manual_seed(0)
    for name, spec in MODELS.items():
        out_dir = os.path.join(OUT, name)
        os.makedirs(out_dir, exist_ok=True)
        for f in os.listdir(out_dir):
            os.remove(os.path.join(out_dir, f))
        config = LlamaConfig(**spec["config"], bos_token_id=1, eos_token_id=2)
        generator = torch.Generator().manual_seed(1234)
        model = LlamaForCausalLM(config).to(torch.float32)
        randomize(model, generator)
        model = model.to(spec["dtype"])
        kwargs = {"safe_serialization": True}
        if spec["max_shard_size"]:
            kwargs["max_shard_size"] = spec["max_shard_size"]
        model.save_pretrained(out_dir, **kwargs)

        # The reference: the saved checkpoint reloaded by transformers and run in fp32.
        ref = LlamaForCausalLM.from_pretrained(out_dir, torch_dtype=torch.float32,
                                               attn_implementation="eager")
        ref.eval()
        prompts, logits = [], []
        for length in PROMPT_LENGTHS:
            ids = torch.randint(0, config.vocab_size, (1, length), generator=generator)
            with torch.no_grad():
                out = ref(input_ids=ids).logits[0]
            prompts.append(ids[0].tolist())
            logits.append([[float(f"{v:.8g}") for v in row] for row in out.tolist()])
        with open(os.path.join(out_dir, "reference.json"), "w") as f:
            json.dump({"generator": "scripts/make_reference.py",
                       "transformers_class": "LlamaForCausalLM", "compute_dtype": "float32",
                       "prompts": prompts, "logits": logits}, f, separators=(",", ":"))
        size = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir))
        print(f"{name}: {sorted(os.listdir(out_dir))}, {size} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
