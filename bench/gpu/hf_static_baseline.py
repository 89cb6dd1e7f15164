#!/usr/bin/env python3
"""Naive static-batching baseline: Hugging Face transformers `generate` on left-padded static
batches of a random request list, on the same Llama model directory that convoy serves.

Each batch of B consecutive requests runs until its longest member is done (greedy, EOS
ignored), so tokens generated past a request's own output length are waste. The last line
printed is `HF_BASELINE key=value ...` for scripts to grep.

    python3 bench/gpu/hf_static_baseline.py --model /path/to/model --json hf.json
"""
import argparse
import json
import os
import random
import sys
import time

import hf_model


def fail(message):
    print(f"hf_static_baseline: error: {message}", file=sys.stderr)
    sys.exit(1)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="directory with config.json and safetensors")
    p.add_argument("--requests", type=int, default=256)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--prompt-min", type=int, default=32)
    p.add_argument("--prompt-max", type=int, default=512)
    p.add_argument("--output-min", type=int, default=32)
    p.add_argument("--output-max", type=int, default=256)
    p.add_argument("--seed", type=int, default=4)
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--json", default=None, help="also write the results to this file")
    p.add_argument("--time-limit-s", type=float, default=0.0,
                   help="stop starting new batches after this many seconds (0: no limit)")
    a = p.parse_args()
    if a.requests < 1 or a.batch_size < 1:
        p.error("--requests and --batch-size must be at least 1")
    if not 1 <= a.prompt_min <= a.prompt_max or not 1 <= a.output_min <= a.output_max:
        p.error("need 1 <= --prompt-min <= --prompt-max and 1 <= --output-min <= --output-max")
    return a


def load_model(path, dtype, device):
    try:
        model = hf_model.load_model(path, dtype, device)
    except RuntimeError as e:
        fail(str(e))
    # Greedy decoding never stops early: with no EOS id left in the generation config, each
    # batch runs exactly max_new_tokens steps, as a static batch waiting for its longest member.
    model.generation_config.eos_token_id = None
    return model


def main():
    args = parse_args()
    config_path = os.path.join(args.model, "config.json")
    if not os.path.isdir(args.model):
        fail(f"model directory {args.model} does not exist")
    try:
        with open(config_path) as f:
            vocab_size = int(json.load(f)["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"cannot read vocab_size from {config_path}: {e!r}")

    import torch
    import transformers
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    cuda = device.startswith("cuda")

    rng = random.Random(args.seed)
    requests = []  # (prompt token ids, output length), in arrival order
    for _ in range(args.requests):
        prompt_len = rng.randint(args.prompt_min, args.prompt_max)
        output_len = rng.randint(args.output_min, args.output_max)
        requests.append(([rng.randrange(vocab_size) for _ in range(prompt_len)], output_len))
    print(f"requests={len(requests)} prompt_tokens_total={sum(len(p) for p, _ in requests)} "
          f"output_tokens_total={sum(o for _, o in requests)} seed={args.seed}")

    model = load_model(args.model, dtype, device)
    print(f"model={args.model} device={device} dtype={args.dtype} "
          f"transformers={transformers.__version__} torch={torch.__version__}")

    def run_batch(batch):
        width = max(len(p) for p, _ in batch)
        new_tokens = max(o for _, o in batch)
        ids = torch.zeros((len(batch), width), dtype=torch.long)  # pad token id 0
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, (prompt, _) in enumerate(batch):  # left padding: prompts end at the right edge
            ids[row, width - len(prompt):] = torch.tensor(prompt)
            mask[row, width - len(prompt):] = 1
        out = model.generate(ids.to(device), attention_mask=mask.to(device),
                             max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, pad_token_id=0, eos_token_id=None, use_cache=True)
        assert tuple(out.shape) == (len(batch), width + new_tokens), (out.shape, width, new_tokens)
        return width, new_tokens

    stats = dict(requests=0, batches=0, useful_tokens=0, generated_tokens=0, prompt_tokens=0,
                 padded_prompt_tokens=0)
    with torch.inference_mode():
        run_batch([([1, 2, 3, 4], 8), ([5, 6], 8)])  # warm-up, unmeasured
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        truncated = False
        for i in range(0, len(requests), args.batch_size):
            if args.time_limit_s > 0 and time.perf_counter() - start >= args.time_limit_s:
                truncated = True
                break
            batch = requests[i:i + args.batch_size]
            width, new_tokens = run_batch(batch)
            if cuda:
                torch.cuda.synchronize()
            stats["requests"] += len(batch)
            stats["batches"] += 1
            stats["useful_tokens"] += sum(o for _, o in batch)
            stats["generated_tokens"] += len(batch) * new_tokens
            stats["prompt_tokens"] += sum(len(p) for p, _ in batch)
            stats["padded_prompt_tokens"] += len(batch) * width
        seconds = time.perf_counter() - start

    result = dict(useful_tok_s=round(stats["useful_tokens"] / seconds, 1),
                  generated_tok_s=round(stats["generated_tokens"] / seconds, 1),
                  requests=stats["requests"], requests_total=len(requests),
                  batch=args.batch_size, seconds=round(seconds, 3), batches=stats["batches"],
                  useful_tokens=stats["useful_tokens"],
                  generated_tokens=stats["generated_tokens"],
                  prompt_tokens=stats["prompt_tokens"],
                  padded_prompt_tokens=stats["padded_prompt_tokens"],
                  truncated=int(truncated), device=device, dtype=args.dtype)
    if truncated:
        print(f"time limit {args.time_limit_s:g}s reached: reporting {stats['requests']} of "
              f"{len(requests)} requests ({stats['batches']} batches)")
    print(f"{stats['requests']} requests in {stats['batches']} static batches of up to "
          f"{args.batch_size}: {seconds:.2f}s, {result['useful_tok_s']} useful output tok/s, "
          f"{result['generated_tok_s']} generated tok/s "
          f"({stats['generated_tokens'] - stats['useful_tokens']} wasted tokens)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    print("HF_BASELINE " + " ".join(f"{k}={v}" for k, v in result.items()), flush=True)


if __name__ == "__main__":
    main()
