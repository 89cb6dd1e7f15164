#!/usr/bin/env python3
"""Compiled-PyTorch peer: plain decode throughput of transformers with a static KV cache and the
one-token decode step under torch.compile (mode="reduce-overhead", i.e. CUDA graphs), the fastest
plain-PyTorch decode (as in gpt-fast), on the same Llama model directory that convoy serves.

The shape is gpu_bench's (bench/gpu/bench_plans.h, BenchShape): per batch, every sequence gets a
random prompt of --prompt-tokens, then --warmup-steps untimed and --decode-steps timed greedy
(argmax) decode steps, so the timed steps read the same context as convoy's `DecodeRate`.
Compilation and graph capture happen before the timing, on a throwaway run of the same cache.
If torch.compile fails or passes --compile-time-limit, that batch is measured eagerly with the
static cache and reported as mode=eager. The last line printed is `TORCH_PEER key=value ...`.

    python3 bench/gpu/torch_peer.py --model /path/to/model --json peer.json
"""
import argparse
import inspect
import json
import os
import signal
import sys
import time

import hf_model

START = time.perf_counter()
# Calls of the compiled step before the timed run: the first compiles, the second records the
# CUDA graph, the third replays it.
COMPILE_CALLS = 3
# Seconds kept, under --time-limit-s, for each batch's measured run after its compilation.
RESERVE_S = 10.0


def fail(message):
    print(f"torch_peer: error: {message}", file=sys.stderr)
    sys.exit(1)


def elapsed():
    return time.perf_counter() - START


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True, help="directory with config.json and safetensors")
    p.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--batches", default="1,64", help="comma-separated batch sizes")
    p.add_argument("--prompt-tokens", type=int, default=128, help="per sequence (gpu_bench: 128)")
    p.add_argument("--warmup-steps", type=int, default=3, help="untimed steps (gpu_bench: 3)")
    p.add_argument("--decode-steps", type=int, default=48, help="timed steps (gpu_bench: 48)")
    p.add_argument("--compile", choices=["on", "off"], default="on",
                   help="off: measure eagerly with the static cache only")
    p.add_argument("--compile-time-limit", type=float, default=90.0,
                   help="seconds one batch's compilation and graph capture may take before that "
                        "batch falls back to eager (0: no limit)")
    p.add_argument("--time-limit-s", type=float, default=0.0,
                   help="the whole run's seconds, counted from the start: compilation is cut to "
                        "fit and a batch that cannot start in time is not run (0: no limit)")
    p.add_argument("--seed", type=int, default=27)
    p.add_argument("--json", default=None, help="also write the results to this file")
    a = p.parse_args()
    try:
        a.batches = [int(b) for b in a.batches.split(",") if b.strip()]
    except ValueError:
        p.error(f"--batches must be comma-separated integers, not {a.batches!r}")
    if not a.batches or min(a.batches) < 1:
        p.error("--batches needs at least one batch size, each at least 1")
    if a.prompt_tokens < 1 or a.decode_steps < 1 or a.warmup_steps < 0:
        p.error("need --prompt-tokens >= 1, --decode-steps >= 1 and --warmup-steps >= 0")
    return a


def load_model(path, dtype, device):
    try:
        return hf_model.load_model(path, dtype, device)
    except RuntimeError as e:
        fail(str(e))


def make_static_cache(model, batch, max_len, device, dtype):
    try:
        from transformers import StaticCache
    except ImportError:
        from transformers.cache_utils import StaticCache
    # transformers 5.x: StaticCache(config, max_cache_len, **kwargs), sized on its first update
    # (extra keywords are accepted and ignored); 4.45-4.55 need max_batch_size, device and dtype;
    # older ones call the batch size batch_size.
    last_error = None
    for size_key in ("max_batch_size", "batch_size"):
        try:
            return StaticCache(config=model.config, max_cache_len=max_len, device=device,
                               dtype=dtype, **{size_key: batch})
        except TypeError as e:
            last_error = e
    fail(f"cannot make a StaticCache with this transformers: {last_error}")


class CompileTimeout(BaseException):  # not Exception: torch must not swallow it
    pass


class Deadline:
    """Raises CompileTimeout in the main thread after `seconds` (no limit if <= 0; POSIX only)."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        if self.seconds > 0 and hasattr(signal, "SIGALRM"):
            signal.signal(signal.SIGALRM, self._expire)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.seconds > 0 and hasattr(signal, "SIGALRM"):
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
        return False

    def _expire(self, signum, frame):
        raise CompileTimeout(f"compilation passed its {self.seconds:.0f} s limit")


class Peer:
    """One model; runs the prompt-then-decode shape at a batch size on a fresh static cache."""

    def __init__(self, model, args, device, dtype, vocab_size):
        import torch
        self.torch = torch
        self.model = model
        self.args = args
        self.device = device
        self.dtype = dtype
        self.vocab_size = vocab_size
        self.cuda = device.startswith("cuda")
        self.graphs = False  # whether the step in use replays CUDA graphs
        # The longest a sequence grows to, as gpu_bench's BenchShape::decode_length().
        self.max_len = args.prompt_tokens + args.warmup_steps + args.decode_steps + 1
        params = inspect.signature(model.forward).parameters
        # transformers 4.x positions a static cache by cache_position; 5.x tracks it in the cache.
        self.takes_cache_position = "cache_position" in params
        self.keep_key = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params),
                             None)

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def step_kwargs(self, cache, positions, cache_position):
        kwargs = dict(past_key_values=cache, position_ids=positions, use_cache=True)
        if self.takes_cache_position:
            kwargs["cache_position"] = cache_position
        return kwargs

    def prefill(self, cache, prompt):
        """Fills the cache with `prompt` (eager); returns the first greedy tokens, [batch, 1]."""
        torch = self.torch
        cache.reset()
        batch, length = prompt.shape
        positions = torch.arange(length, device=self.device).unsqueeze(0).expand(batch, -1)
        kwargs = self.step_kwargs(cache, positions, torch.arange(length, device=self.device))
        if self.keep_key:
            kwargs[self.keep_key] = 1
        logits = self.model(prompt, **kwargs).logits
        return torch.argmax(logits[:, -1], dim=-1, keepdim=True)

    def decode_one(self, tokens, positions, cache_position, cache):
        out = self.model(tokens, **self.step_kwargs(cache, positions, cache_position))
        return self.torch.argmax(out.logits[:, -1], dim=-1, keepdim=True)

    def decode(self, step, cache, tokens, done, steps):
        """Runs `steps` greedy decode steps on from `tokens`, the input of step `done` after the
        prompt (0: the prefill's tokens); returns the last step's tokens."""
        torch = self.torch
        pos = self.args.prompt_tokens + done
        positions = torch.full((tokens.shape[0], 1), pos, dtype=torch.long, device=self.device)
        cache_position = torch.full((1,), pos, dtype=torch.long, device=self.device)
        for _ in range(steps):
            if self.graphs:
                torch.compiler.cudagraph_mark_step_begin()
            # A CUDA graph's output lives in its pool only until the next replay: copy it out.
            tokens = step(tokens, positions, cache_position, cache).clone()
            positions.add_(1)
            cache_position.add_(1)
        return tokens

    def compile_step(self, cache, prompt, limit_s):
        """(the compiled decode step, its mode), or (None, why not) when it cannot be had in
        `limit_s` seconds. Leaves the cache dirty: the caller prefills again."""
        torch = self.torch
        errors = []
        for fullgraph in (True, False):
            torch._dynamo.reset()
            fn = torch.compile(self.decode_one, mode="reduce-overhead", fullgraph=fullgraph,
                               dynamic=False)
            self.graphs = self.cuda
            try:
                with Deadline(limit_s):
                    self.decode(fn, cache, self.prefill(cache, prompt), 0, COMPILE_CALLS)
                    self.sync()
                return fn, "reduce-overhead" if fullgraph else "reduce-overhead-graph-breaks"
            except CompileTimeout as e:
                errors.append(str(e))
                break  # without fullgraph it would take as long
            except Exception as e:  # noqa: BLE001 - reported, then the next try or eager
                first_line = (str(e).strip().splitlines() or [""])[0][:300]
                errors.append(f"fullgraph={fullgraph}: {type(e).__name__}: {first_line}")
        self.graphs = False
        torch._dynamo.reset()
        return None, "; ".join(errors)

    def run(self, batch, compile_limit_s):
        """Measures one batch size; compile_limit_s None: no time to compile (eager)."""
        torch = self.torch
        args = self.args
        gen = torch.Generator().manual_seed(args.seed * 1000 + batch)
        prompt = torch.randint(0, self.vocab_size, (batch, args.prompt_tokens), generator=gen)
        prompt = prompt.to(self.device)
        cache = make_static_cache(self.model, batch, self.max_len, self.device, self.dtype)
        self.graphs = False
        step, mode = None, "--compile off"
        compile_start = time.perf_counter()
        if args.compile == "on":
            if compile_limit_s is None:
                mode = "no time left to compile"
            else:
                step, mode = self.compile_step(cache, prompt, compile_limit_s)
        result = dict(compile_s=round(time.perf_counter() - compile_start, 1))
        if step is None:
            print(f"batch {batch}: torch.compile not used ({mode}): measuring EAGER with the "
                  f"static cache", flush=True)
            result["fallback"] = mode
            step, mode = self.decode_one, "eager"
        # The measured run: the prompt again in the same cache, warm-up steps, the timed steps.
        tokens = self.decode(step, cache, self.prefill(cache, prompt), 0, args.warmup_steps)
        self.sync()
        t0 = time.perf_counter()
        tokens = self.decode(step, cache, tokens, args.warmup_steps, args.decode_steps)
        self.sync()
        seconds = time.perf_counter() - t0
        if int(tokens.min()) < 0 or int(tokens.max()) >= self.vocab_size:
            fail(f"batch {batch}: decoded token ids outside the vocabulary")
        result.update(mode=mode, tok_s=round(batch * args.decode_steps / seconds, 1),
                      ms=round(seconds / args.decode_steps * 1e3, 3))
        return result


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

    try:
        import torch
        import transformers
    except ImportError as e:
        fail(f"{e}: this needs PyTorch and transformers ({sys.executable})")
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        fail(f"--device {device}, but torch {torch.__version__} sees no CUDA device")
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    torch.manual_seed(args.seed)
    torch.set_float32_matmul_precision("high")  # only --dtype fp32 is affected (TF32, as gpt-fast)

    model = load_model(args.model, dtype, device)
    peer = Peer(model, args, device, dtype, vocab_size)
    print(f"model={args.model} device={device} dtype={args.dtype} "
          f"transformers={transformers.__version__} torch={torch.__version__} "
          f"prompt={args.prompt_tokens} warmup={args.warmup_steps} decode={args.decode_steps} "
          f"cache_len={peer.max_len} loaded_in={elapsed():.1f}s", flush=True)

    result = dict(device=device, dtype=args.dtype, torch=torch.__version__,
                  transformers=transformers.__version__, prompt_tokens=args.prompt_tokens,
                  decode_steps=args.decode_steps, batches=",".join(map(str, args.batches)))
    modes, not_run, compile_s = [], [], 0.0
    with torch.no_grad():
        for i, batch in enumerate(args.batches):
            compile_limit = args.compile_time_limit if args.compile_time_limit > 0 else 0
            if args.time_limit_s > 0:
                # Each batch still to run keeps RESERVE_S for its measured run (eager at worst)
                # and gets an equal share of the rest to compile in; a batch with under
                # RESERVE_S left is not started.
                left = args.time_limit_s - elapsed()
                if left < RESERVE_S:
                    not_run.append(batch)
                    print(f"batch {batch}: NOT RUN, {max(left, 0):.0f} s left of "
                          f"--time-limit-s {args.time_limit_s:g}", flush=True)
                    continue
                to_run = len(args.batches) - i
                room = (left - RESERVE_S * to_run) / to_run
                compile_limit = min(compile_limit, room) if compile_limit > 0 else room
                if compile_limit < 5:
                    compile_limit = None
            r = peer.run(batch, compile_limit)
            compile_s += r["compile_s"]
            modes.append(r["mode"])
            for key, value in r.items():
                result[f"b{batch}_{key}"] = value
            print(f"batch {batch}: {r['tok_s']} tok/s, {r['ms']} ms/step, mode={r['mode']}, "
                  f"compile {r['compile_s']} s", flush=True)
    result["mode"] = "+".join(dict.fromkeys(modes)) or "none"
    result["compile_s"] = round(compile_s, 1)
    result["not_run"] = ",".join(map(str, not_run)) or "none"
    result["seconds"] = round(elapsed(), 1)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    # One token per field: the fallback reasons are in the JSON and printed above.
    line = {k: v for k, v in result.items() if not k.endswith("_fallback")}
    print("TORCH_PEER " + " ".join(f"{k}={v}" for k, v in line.items()), flush=True)
    if not_run:
        sys.exit(3)


if __name__ == "__main__":
    main()
