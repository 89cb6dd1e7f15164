"""1,000 concurrent streamed chat completions through the real `openai` client (AsyncOpenAI) on
loopback: every one is answered to its end, convoyd's thread count does not grow with the
connections (no thread per connection or per request), and every KV block is free afterwards.

Usage: openai_load_test.py CONVOYD CONVOY CONVOY_MKMODEL SOURCE_DIR

The model is a small random-weight Llama with SmolLM2's tokenizer and chat template (fixtures), so
that the answers are text; what they say does not matter here. The test's only bound is on how
long it may take to be answered at all (LIVENESS_S), never on speed.
"""
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import httpx2 as httpx
import openai

CONVOYD, CONVOY, MKMODEL, SOURCE = sys.argv[1:5]
STREAMS = 1000
MAX_TOKENS = 8
LIVENESS_S = 600


def make_model(directory):
    subprocess.run([MKMODEL, "--out", directory, "--preset", "tiny", "--vocab-size", "49152",
                    "--max-position", "512", "--seed", "3"], check=True, capture_output=True)
    fixtures = os.path.join(SOURCE, "tests", "fixtures")
    shutil.copy(os.path.join(fixtures, "tokenizer", "smollm2", "tokenizer.json"), directory)
    with open(os.path.join(fixtures, "chat_template", "smollm2.json")) as f:
        template = json.load(f)["template"]
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<|im_start|>", "eos_token": "<|im_end|>",
                   "chat_template": template}, f)


def wait_for_file(path, process):
    deadline = time.monotonic() + LIVENESS_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"convoyd exited with {process.returncode}")
        if os.path.exists(path) and open(path).read().strip():
            return int(open(path).read().strip())
        time.sleep(0.1)
    raise RuntimeError(f"no {path} after {LIVENESS_S} s")


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def server_info(address):
    out = subprocess.run([CONVOY, "info", "--addr", address], capture_output=True, text=True,
                         timeout=60, check=True)
    return json.loads(out.stdout)["server"]


async def one_stream(client, model, index):
    stream = await client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": f"Question number {index}?"}],
        max_tokens=MAX_TOKENS, temperature=0, stream=True)
    text, finish = "", None
    async for chunk in stream:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            finish = choice.finish_reason or finish
    return finish


async def load(port, pid, peak):
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                                max_retries=0, timeout=LIVENESS_S,
                                http_client=openai.DefaultAsyncHttpxClient(
                                    limits=httpx.Limits(max_connections=STREAMS + 10,
                                                        max_keepalive_connections=STREAMS + 10)))
    model = (await client.models.list()).data[0].id

    async def watch_threads():
        while True:
            peak[0] = max(peak[0], threads_of(pid))
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch_threads())
    try:
        results = await asyncio.wait_for(
            asyncio.gather(*(one_stream(client, model, i) for i in range(STREAMS)),
                           return_exceptions=True), LIVENESS_S)
    finally:
        watcher.cancel()
        await client.close()
    return results


def main():
    work = tempfile.mkdtemp(prefix="convoy_openai_load_", dir=os.environ.get("TEST_TMPDIR"))
    model_dir = os.path.join(work, "model")
    make_model(model_dir)
    config = os.path.join(work, "config.pbtxt")
    with open(config, "w") as f:
        f.write("scheduler { max_batch_size: 64 max_num_batched_tokens: 4096 "
                "max_queue_size: 2000 }\n"
                "kv_cache { block_size: 16 memory_budget_bytes: 67108864 }\n"
                "executor { cpu_threads: 1 }\n")
    log_path = os.path.join(work, "convoyd.log")
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            [CONVOYD, "--config", config, "--model", model_dir, "--listen-address", "127.0.0.1",
             "--port", "0", "--port-file", os.path.join(work, "grpc.port"),
             "--http-listen-address", "127.0.0.1", "--http-port", "0",
             "--http-port-file", os.path.join(work, "http.port"), "--metrics-port", "0"],
            stdout=log, stderr=subprocess.STDOUT)
    failures = []
    try:
        address = f"127.0.0.1:{wait_for_file(os.path.join(work, 'grpc.port'), process)}"
        http_port = wait_for_file(os.path.join(work, "http.port"), process)
        deadline = time.monotonic() + LIVENESS_S
        while subprocess.run([CONVOY, "health", "--addr", address],
                             capture_output=True).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError("convoyd did not become ready")
            time.sleep(0.2)
        # One request first, so that every thread the server starts lazily exists.
        asyncio.run(load_one(http_port))
        before = threads_of(process.pid)
        peak = [before]
        results = asyncio.run(load(http_port, process.pid, peak))
        errors = [r for r in results if isinstance(r, BaseException)]
        unfinished = [r for r in results if not isinstance(r, BaseException) and r is None]
        if errors:
            failures.append(f"{len(errors)} of {STREAMS} streams failed, e.g. {errors[0]!r}")
        if unfinished:
            failures.append(f"{len(unfinished)} streams ended without a finish_reason")
        # A thread per connection would add about a thousand; gRPC may start a few of its own.
        if peak[0] > before + 4:
            failures.append(f"convoyd's threads grew with the connections: {before} before, "
                            f"{peak[0]} at the peak")
        info = server_info(address)
        if info["kv_blocks_free"] != info["kv_blocks_total"] or info["num_running"] != 0:
            failures.append(f"KV blocks still held after the load: {info}")
        print(f"{STREAMS} streams answered; convoyd threads {before} before, peak {peak[0]}; "
              f"KV blocks free {info['kv_blocks_free']}/{info['kv_blocks_total']}")
    finally:
        process.terminate()
        code = process.wait(timeout=LIVENESS_S)
        if code != 0:
            failures.append(f"convoyd exited {code} after SIGTERM")
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        print(open(log_path).read()[-4000:])
        sys.exit(1)
    shutil.rmtree(work)
    print("PASSED")


async def load_one(port):
    client = openai.AsyncOpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused",
                                max_retries=0, timeout=LIVENESS_S)
    model = (await client.models.list()).data[0].id
    await one_stream(client, model, -1)
    await client.close()


if __name__ == "__main__":
    main()
