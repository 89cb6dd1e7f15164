"""Writes a Llama-architecture GGUF file with random F16 weights and a real vocabulary, for the
speed and memory comparisons of scripts/quant-compare.sh: llama.cpp's llama-quantize then turns
it into the quantized files people hold (Q4_K_M, Q8_0, ...), which both engines run as they are.

    random_llama_gguf.py --vocab ggml-vocab-llama-spm.gguf --out model.f16.gguf [--shape tinyllama]

The shape is a real model's (TinyLlama-1.1B: hidden 2048, 22 layers, 32 query heads over 4 KV
heads, MLP 5632); the vocabulary's metadata (tokens, scores, types, special ids) is copied from a
vocabulary-only GGUF file, such as the ones llama.cpp keeps for its tests, whose size sets the
embedding and output rows. Weights are normal with a standard deviation of 0.02 (norms 1), from a
fixed seed: the same arguments write the same bytes. Speed and memory do not depend on the
values; the text such a model writes is noise.
"""
import argparse
import sys

import numpy as np
import gguf

SHAPES = {
    # hidden, intermediate, layers, heads, kv_heads, context, rope base, rms eps
    "tinyllama": (2048, 5632, 22, 32, 4, 2048, 10000.0, 1e-5),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 131072, 500000.0, 1e-5),
    "llama-3.1-8b": (4096, 14336, 32, 32, 8, 131072, 500000.0, 1e-5),
}


def copy_vocabulary(reader, writer):
    """Every tokenizer.* field of `reader`, as it is; returns the number of tokens."""
    n_tokens = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        value = field.contents()
        if kind == gguf.GGUFValueType.ARRAY:
            writer.add_array(name, value)
            if name == "tokenizer.ggml.tokens":
                n_tokens = len(value)
        else:
            writer.add_key_value(name, value, kind)
    if n_tokens == 0:
        raise SystemExit("random_llama_gguf: the vocabulary file has no tokenizer.ggml.tokens")
    return n_tokens


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vocab", required=True, help="a GGUF file holding a vocabulary")
    parser.add_argument("--out", required=True, help="the GGUF file to write")
    parser.add_argument("--shape", default="tinyllama", choices=sorted(SHAPES))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    hidden, inter, layers, heads, kv_heads, context, rope_base, eps = SHAPES[args.shape]
    head_dim = hidden // heads
    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_name(f"random {args.shape}")
    writer.add_context_length(context)
    writer.add_embedding_length(hidden)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(inter)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(rope_base)
    writer.add_layer_norm_rms_eps(eps)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    vocab = copy_vocabulary(gguf.GGUFReader(args.vocab), writer)
    writer.add_vocab_size(vocab)

    rng = np.random.default_rng(args.seed)

    def weight(rows, cols):
        # GGUF lists a matrix's dimensions fastest first; numpy's shape is (rows, cols).
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(hidden, dtype=np.float32)
    writer.add_tensor("token_embd.weight", weight(vocab, hidden))
    for i in range(layers):
        p = f"blk.{i}."
        writer.add_tensor(p + "attn_norm.weight", ones)
        writer.add_tensor(p + "attn_q.weight", weight(heads * head_dim, hidden))
        writer.add_tensor(p + "attn_k.weight", weight(kv_heads * head_dim, hidden))
        writer.add_tensor(p + "attn_v.weight", weight(kv_heads * head_dim, hidden))
        writer.add_tensor(p + "attn_output.weight", weight(hidden, heads * head_dim))
        writer.add_tensor(p + "ffn_norm.weight", ones)
        writer.add_tensor(p + "ffn_gate.weight", weight(inter, hidden))
        writer.add_tensor(p + "ffn_up.weight", weight(inter, hidden))
        writer.add_tensor(p + "ffn_down.weight", weight(hidden, inter))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", weight(vocab, hidden))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"random_llama_gguf: wrote {args.out} ({args.shape}, {vocab} tokens)", file=sys.stderr)


if __name__ == "__main__":
    main()
