"""convoyd's OpenAI-compatible API driven by the real `openai` Python client and OpenAI's Agents
SDK built on it (`openai-agents`; both from PyPI, in the test virtual environment of
scripts/test-venv.sh), on the default model (SmolLM2-135M-Instruct, fetched by
scripts/fetch-default-model.sh).

Usage: openai_client_test.py CONVOYD CONVOY MODEL_FILE CONFIG

Every answer is compared with convoy's own gRPC API (the `convoy` client's --json output) for the
same greedy request; errors are checked for their HTTP status and the field they name; a stream
the client drops must give its KV blocks back; malformed requests and garbage must leave the
server serving. Waits are bounded; nothing is timed.
"""
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import typing
import unittest

import agents
import openai
import pydantic

CONVOYD, CONVOY, MODEL, CONFIG = sys.argv[1:5]
del sys.argv[1:5]
# CONVOY_MODELS_DIR moves the models folder, as for the C++ tests (relative: to the source tree,
# two folders above the model path given).
if os.environ.get("CONVOY_MODELS_DIR"):
    MODEL = os.path.join(os.path.dirname(os.path.dirname(MODEL)), os.environ["CONVOY_MODELS_DIR"],
                         os.path.basename(MODEL))
LIVENESS_S = 120


def read_port(path, process, log):
    deadline = time.monotonic() + LIVENESS_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"convoyd exited with {process.returncode}:\n{open(log).read()}")
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"convoyd did not write {path} in {LIVENESS_S} s")


class Server:
    """convoyd on free loopback ports, SERVING before the tests start."""

    def __init__(self):
        # Under TEST_TMPDIR where set, as the C++ tests' scratch files are (CI checks it is left
        # empty).
        self.dir = tempfile.mkdtemp(prefix="convoy_openai_", dir=os.environ.get("TEST_TMPDIR"))
        self.log = os.path.join(self.dir, "convoyd.log")
        grpc_file = os.path.join(self.dir, "grpc.port")
        http_file = os.path.join(self.dir, "http.port")
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [CONVOYD, "--config", CONFIG, "--model", MODEL, "--listen-address", "127.0.0.1",
                 "--port", "0", "--port-file", grpc_file, "--http-listen-address", "127.0.0.1",
                 "--http-port", "0", "--http-port-file", http_file, "--metrics-port", "0"],
                stdout=log, stderr=subprocess.STDOUT)
        self.grpc = f"127.0.0.1:{read_port(grpc_file, self.process, self.log)}"
        self.http_port = read_port(http_file, self.process, self.log)
        deadline = time.monotonic() + LIVENESS_S
        while subprocess.run([CONVOY, "health", "--addr", self.grpc],
                             capture_output=True).returncode != 0:
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"convoyd did not become ready:\n{open(self.log).read()}")
            time.sleep(0.2)

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=LIVENESS_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
        return self.process.returncode

    def convoy(self, *args):
        """convoy generate --json through the gRPC API: the reference answer."""
        for attempt in range(3):
            out = subprocess.run([CONVOY, "generate", "--addr", self.grpc, "--json", *args],
                                 capture_output=True, text=True, timeout=LIVENESS_S)
            # A fresh Debian root once failed one connect to the listening server on loopback
            # ("failed to connect to all addresses ... No such file or directory") while the
            # calls before and after it went through: a new connection is tried, at most twice.
            # Any other failure, or the server gone, fails at once.
            if (out.returncode == 0 or "failed to connect" not in out.stderr
                    or self.process.poll() is not None):
                break
            time.sleep(1)
        if out.returncode != 0:
            raise RuntimeError(f"convoy generate failed: {out.stderr}")
        return json.loads(out.stdout.strip().splitlines()[-1])

    def info(self):
        out = subprocess.run([CONVOY, "info", "--addr", self.grpc], capture_output=True,
                             text=True, timeout=LIVENESS_S)
        return json.loads(out.stdout)["server"]

    def raw(self, data, read_limit=65536):
        """Sends bytes on a fresh connection; returns what came back before it closed."""
        with socket.create_connection(("127.0.0.1", self.http_port), timeout=30) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            chunks = []
            while True:
                chunk = s.recv(read_limit)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks)


SERVER = None
QUESTION = "What is the capital of France?"


class OpenAiClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.client = openai.OpenAI(base_url=f"http://127.0.0.1:{SERVER.http_port}/v1",
                                   api_key="unused", max_retries=0, timeout=LIVENESS_S)
        cls.model = cls.client.models.list().data[0].id

    def test_models(self):
        models = self.client.models.list().data
        self.assertEqual(len(models), 1)
        self.assertEqual(models[0].id, os.path.basename(MODEL).removesuffix(".gguf"))
        self.assertEqual(self.client.models.retrieve(models[0].id), models[0])
        with self.assertRaises(openai.NotFoundError) as missing:
            self.client.models.retrieve("gpt-4o")
        self.assertEqual(missing.exception.body["code"], "model_not_found")

    def test_chat_equals_the_native_api(self):
        expected = SERVER.convoy("--chat", QUESTION, "--max-tokens", "24")
        answer = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": QUESTION}],
            max_tokens=24, temperature=0)
        choice = answer.choices[0]
        self.assertEqual(choice.message.role, "assistant")
        self.assertEqual(choice.message.content, expected["text"])
        self.assertEqual(choice.finish_reason, expected["finish_reason"])
        self.assertEqual(answer.usage.prompt_tokens, expected["usage"]["prompt_tokens"])
        self.assertEqual(answer.usage.completion_tokens, expected["usage"]["completion_tokens"])
        # Not asserted: that the answer says Paris. On the default Q4_1 file, run in its own blocks
        # (executor.cpu_weights AUTO), greedy decoding says "L'Étoile, ...", as llama.cpp does on
        # the same file; dequantized to fp32 it says Paris (daemon_default_model_test checks those
        # tokens against Hugging Face transformers).
        self.assertTrue(choice.message.content.strip())

    def test_openai_fields_that_change_no_answer_are_taken(self):
        # What agent clients send beside a chat request, through the SDK's own parameters: the
        # answer is the one without them. Those that would change it are refused by name.
        expected = SERVER.convoy("--chat", QUESTION, "--max-tokens", "12")
        answer = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": QUESTION}], max_tokens=12,
            temperature=0, store=True, metadata={"session": "s-1", "prompt": "p-2"},
            service_tier="auto", prompt_cache_key="user-42", prompt_cache_retention="24h",
            safety_identifier="hash-of-a-user", modalities=["text"],
            prediction={"type": "content", "content": "The capital of France is Paris."})
        self.assertEqual(answer.choices[0].message.content, expected["text"])
        for name, value in (("audio", {"voice": "alloy", "format": "wav"}),
                            ("web_search_options", {}), ("reasoning_effort", "low")):
            with self.subTest(name), self.assertRaises(openai.BadRequestError) as refused:
                self.client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": QUESTION}],
                    max_tokens=4, **{name: value})
            self.assertEqual(refused.exception.body["param"], name)

    def test_usage_counts_the_prompt_tokens_the_prefix_cache_held(self):
        # A long prompt, new to the server, then again: the second time all its whole blocks but
        # the last come from the cache, and each API says so, as convoy's own does.
        prompt = " ".join(f"word{i}" for i in range(300)) + " " + str(time.monotonic_ns())
        messages = [{"role": "user", "content": prompt}]
        first = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=2, temperature=0)
        second = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=2, temperature=0)
        prompt_tokens = second.usage.prompt_tokens
        cached = second.usage.prompt_tokens_details.cached_tokens
        self.assertGreater(cached, first.usage.prompt_tokens_details.cached_tokens)
        self.assertGreater(cached, prompt_tokens - 2 * 16)  # the default config's blocks: 16
        self.assertLess(cached, prompt_tokens)
        self.assertEqual(cached % 16, 0)
        response = self.client.responses.create(model=self.model, input=prompt,
                                                max_output_tokens=2, temperature=0)
        self.assertEqual(response.usage.input_tokens_details.cached_tokens, cached)
        native = SERVER.convoy("--chat", prompt, "--max-tokens", "2")
        self.assertEqual(native["usage"]["cached_prompt_tokens"], cached)

    def test_streamed_chat_equals_the_whole_answer(self):
        whole = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "system", "content": "Answer in one word."},
                                        {"role": "user", "content": "Name a fruit."}],
            max_completion_tokens=20, temperature=0)
        stream = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "system", "content": "Answer in one word."},
                                        {"role": "user", "content": "Name a fruit."}],
            max_completion_tokens=20, temperature=0, stream=True,
            stream_options={"include_usage": True})
        text, finish, usage, chunks = "", None, None, 0
        for chunk in stream:
            chunks += 1
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                text += choice.delta.content or ""
                finish = choice.finish_reason or finish
        self.assertEqual(text, whole.choices[0].message.content)
        self.assertEqual(finish, whole.choices[0].finish_reason)
        self.assertIsNotNone(usage)
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)
        self.assertGreater(chunks, 2)

    def test_completions_equal_the_native_api(self):
        prompt = "The capital of Germany is"
        expected = SERVER.convoy("--prompt", prompt, "--max-tokens", "12", "--logprobs")
        answer = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=12,
                                                temperature=0, logprobs=2)
        choice = answer.choices[0]
        self.assertEqual(choice.text, expected["text"])
        self.assertEqual(choice.finish_reason, expected["finish_reason"])
        self.assertEqual(len(choice.logprobs.token_logprobs), len(expected["token_ids"]))
        for got, want in zip(choice.logprobs.token_logprobs, expected["logprobs"]):
            self.assertAlmostEqual(got, want, places=4)
        self.assertTrue(all(len(top) <= 2 for top in choice.logprobs.top_logprobs))
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model=self.model, prompt=prompt, max_tokens=12, temperature=0, stream=True)
            if c.choices)
        self.assertEqual(streamed, expected["text"])
        ids = self.client.completions.create(model=self.model,
                                             prompt=expected["prompt_token_ids"],
                                             max_tokens=12, temperature=0)
        self.assertEqual(ids.choices[0].text, expected["text"])

    def test_chat_logprobs_and_stop(self):
        expected = SERVER.convoy("--chat", "Count from 1 to 9.", "--max-tokens", "40",
                                 "--logprobs", "--stop", "4")
        answer = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "Count from 1 to 9."}],
            max_tokens=40, temperature=0, stop=["4"], logprobs=True, top_logprobs=3)
        choice = answer.choices[0]
        self.assertEqual(choice.message.content, expected["text"])
        self.assertNotIn("4", choice.message.content)
        self.assertEqual(choice.finish_reason, "stop")
        self.assertEqual(len(choice.logprobs.content), answer.usage.completion_tokens)
        for entry, want in zip(choice.logprobs.content, expected["logprobs"]):
            self.assertAlmostEqual(entry.logprob, want, places=4)
            self.assertLessEqual(len(entry.top_logprobs), 3)

    def test_bad_fields_are_named(self):
        messages = [{"role": "user", "content": "hi"}]
        cases = [
            (dict(messages=messages, max_tokens=0), "max_tokens"),
            (dict(messages=messages, temperature=-1), "temperature"),
            (dict(messages=messages, top_p=1.5), "top_p"),
            (dict(messages=messages, stop=[""]), "stop"),
            (dict(messages=messages, n=9), "n"),
            (dict(messages=messages, presence_penalty=3), "presence_penalty"),
            (dict(messages=messages, logit_bias={"99999999": 1}), "logit_bias[99999999]"),
            (dict(messages=[{"role": "wizard", "content": "hi"}]), "messages[0].role"),
            (dict(messages=messages, max_tokens=1000000), "max_tokens"),
            (dict(messages=messages, extra_body={"bogus": 1}), "bogus"),
        ]
        for kwargs, param in cases:
            with self.subTest(param=param):
                with self.assertRaises(openai.BadRequestError) as caught:
                    self.client.chat.completions.create(model=self.model, **kwargs)
                self.assertEqual(caught.exception.status_code, 400)
                self.assertEqual(caught.exception.body["param"], param)
        with self.assertRaises(openai.NotFoundError) as caught:
            self.client.chat.completions.create(model="gpt-17", messages=messages)
        self.assertEqual(caught.exception.body["code"], "model_not_found")
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model=self.model, prompt="x" * 40000, max_tokens=4)

    def test_n_choices_whole_and_streamed(self):
        messages = [{"role": "user", "content": "Tell me a one-line story."}]
        whole = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=16, temperature=1.0, seed=5, n=3)
        self.assertEqual([c.index for c in whole.choices], [0, 1, 2])
        # Choice i is the request with seed 5 + i, as the native API gives it.
        expected = [SERVER.convoy("--chat", messages[0]["content"], "--max-tokens", "16",
                                  "--temperature", "1", "--seed", str(5 + i)) for i in range(3)]
        for choice, want in zip(whole.choices, expected):
            self.assertEqual(choice.message.content, want["text"])
        # The prompt counted once, every choice's tokens.
        self.assertEqual(whole.usage.prompt_tokens, expected[0]["usage"]["prompt_tokens"])
        self.assertEqual(whole.usage.completion_tokens,
                         sum(e["usage"]["completion_tokens"] for e in expected))
        self.assertGreater(len({c.message.content for c in whole.choices}), 1)
        stream = self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=16, temperature=1.0, seed=5, n=3,
            stream=True, stream_options={"include_usage": True})
        texts, finishes, usage = ["", "", ""], [None, None, None], None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for choice in chunk.choices:
                texts[choice.index] += choice.delta.content or ""
                finishes[choice.index] = choice.finish_reason or finishes[choice.index]
        self.assertEqual(texts, [c.message.content for c in whole.choices])
        self.assertEqual(finishes, [c.finish_reason for c in whole.choices])
        self.assertEqual(usage.completion_tokens, whole.usage.completion_tokens)
        completions = self.client.completions.create(model=self.model, prompt="Once upon a time",
                                                     max_tokens=8, temperature=0, n=2)
        self.assertEqual(len(completions.choices), 2)
        self.assertEqual(completions.choices[0].text, completions.choices[1].text)

    def test_echo_returns_the_prompt_and_its_logprobs(self):
        prompt = "The capital of Germany is"
        plain = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=6,
                                               temperature=0, logprobs=2)
        echoed = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=6,
                                                temperature=0, logprobs=2, echo=True)
        choice = echoed.choices[0]
        self.assertEqual(choice.text, prompt + plain.choices[0].text)
        lp = choice.logprobs
        prompt_len = echoed.usage.prompt_tokens
        self.assertEqual(len(lp.tokens), prompt_len + len(plain.choices[0].logprobs.tokens))
        # The prompt's first token has nothing before it; the others are scored by the model.
        self.assertIsNone(lp.token_logprobs[0])
        self.assertIsNone(lp.top_logprobs[0])
        for value in lp.token_logprobs[1:prompt_len]:
            self.assertLessEqual(value, 0.0)
        for top in lp.top_logprobs[1:prompt_len]:
            self.assertLessEqual(len(top), 2)
        # The answer's part is what it is without echo.
        for got, want in zip(lp.token_logprobs[prompt_len:], plain.choices[0].logprobs.token_logprobs):
            self.assertAlmostEqual(got, want, places=4)
        self.assertEqual(lp.text_offset[prompt_len], len("".join(lp.tokens[:prompt_len])))
        # Scoring is consistent with generation: the prompt extended by the answer's first token
        # scores that token as the answer's logprob.
        first = plain.choices[0].logprobs.tokens[0]
        extended = self.client.completions.create(model=self.model, prompt=prompt + first,
                                                  max_tokens=1, temperature=0, logprobs=0,
                                                  echo=True)
        ext = extended.choices[0].logprobs
        if "".join(ext.tokens[:extended.usage.prompt_tokens]) == prompt + first:
            self.assertAlmostEqual(ext.token_logprobs[extended.usage.prompt_tokens - 1],
                                   plain.choices[0].logprobs.token_logprobs[0], places=3)
        # Streamed: the first chunk starts with the prompt.
        streamed = "".join(c.choices[0].text for c in self.client.completions.create(
            model=self.model, prompt=prompt, max_tokens=6, temperature=0, echo=True, stream=True)
            if c.choices)
        self.assertEqual(streamed, choice.text)
        # Without logprobs, echo costs nothing in the engine: just the text.
        no_logprobs = self.client.completions.create(model=self.model, prompt=prompt,
                                                     max_tokens=6, temperature=0, echo=True)
        self.assertEqual(no_logprobs.choices[0].text, choice.text)

    def test_logit_bias_and_penalties_equal_the_native_api(self):
        question = "Count from 1 to 9."
        plain = SERVER.convoy("--chat", question, "--max-tokens", "12")
        forced = plain["token_ids"][2]
        cases = [
            (dict(logit_bias={str(forced): 100}), ["--logit-bias", f"{forced}=100"]),
            (dict(logit_bias={str(plain["token_ids"][0]): -100}),
             ["--logit-bias", f"{plain['token_ids'][0]}=-100"]),
            (dict(presence_penalty=2, frequency_penalty=2),
             ["--presence-penalty", "2", "--frequency-penalty", "2"]),
            (dict(extra_body={"repetition_penalty": 1.3, "min_p": 0.1}),
             ["--repetition-penalty", "1.3", "--min-p", "0.1"]),
        ]
        for kwargs, flags in cases:
            with self.subTest(flags=flags):
                expected = SERVER.convoy("--chat", question, "--max-tokens", "12", *flags)
                answer = self.client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": question}],
                    max_tokens=12, temperature=0, **kwargs)
                self.assertEqual(answer.choices[0].message.content, expected["text"])
                self.assertNotEqual(expected["token_ids"], plain["token_ids"])
        forced_answer = SERVER.convoy("--chat", question, "--max-tokens", "12",
                                      "--logit-bias", f"{forced}=100")
        self.assertEqual(forced_answer["token_ids"], [forced] * 12)
        banned = SERVER.convoy("--chat", question, "--max-tokens", "12",
                               "--logit-bias", f"{plain['token_ids'][0]}=-100")
        self.assertNotIn(plain["token_ids"][0], banned["token_ids"])

    def test_structured_output_parses_into_a_pydantic_model(self):
        # What agent frameworks send: a Pydantic model as a strict json_schema response_format.
        # Bounded strings and lists: a 135M model left free repeats itself until max_tokens, and
        # then the text is cut (finish_reason "length"), which parse() refuses.
        short = pydantic.Field(max_length=40)

        class Capital(pydantic.BaseModel):
            country: str = short
            city: str = short
            population_millions: int = pydantic.Field(ge=0, le=10000)
            landmarks: list[typing.Annotated[str, short]] = pydantic.Field(max_length=3)

        for temperature in (0, 1.0):
            with self.subTest(temperature=temperature):
                answer = self.client.chat.completions.parse(
                    model=self.model, messages=[{"role": "user", "content": QUESTION}],
                    response_format=Capital, max_tokens=400, temperature=temperature, seed=3)
                choice = answer.choices[0]
                self.assertEqual(choice.finish_reason, "stop", choice.message.content)
                self.assertIsInstance(choice.message.parsed, Capital)
                Capital.model_validate_json(choice.message.content)

    def test_responses_api_equals_chat_completions(self):
        # The Responses API reads a request as the chat request it means: the same answer.
        system, question = "Answer in a few words.", "Name a large city."
        chat = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "system", "content": system},
                                        {"role": "user", "content": question}],
            max_completion_tokens=16, temperature=0)
        for given in (question, [{"role": "user", "content": question}],
                      [{"type": "message", "role": "user",
                        "content": [{"type": "input_text", "text": question}]}]):
            with self.subTest(input=given):
                response = self.client.responses.create(
                    model=self.model, instructions=system, input=given, max_output_tokens=16,
                    temperature=0)
                self.assertEqual(response.object, "response")
                self.assertEqual(response.output_text, chat.choices[0].message.content)
                self.assertEqual(response.usage.input_tokens, chat.usage.prompt_tokens)
                self.assertEqual(response.usage.output_tokens, chat.usage.completion_tokens)
                cut = chat.choices[0].finish_reason == "length"
                self.assertEqual(response.status, "incomplete" if cut else "completed")
                if cut:
                    self.assertEqual(response.incomplete_details.reason, "max_output_tokens")
                self.assertEqual(response.instructions, system)
                self.assertEqual(response.max_output_tokens, 16)

        # Streamed, through the SDK's stream helper (it rebuilds the response from the events and
        # checks their order): the deltas make the same text, the final response is the same.
        # (The helper's get_final_response() takes response.completed only; a response cut by
        # max_output_tokens ends with response.incomplete, which carries the response too.)
        with self.client.responses.stream(model=self.model, instructions=system, input=question,
                                          max_output_tokens=16, temperature=0) as stream:
            events = list(stream)
        types = [e.type for e in events]
        self.assertEqual(types[:2], ["response.created", "response.in_progress"])
        self.assertEqual(types[-1], "response.incomplete" if cut else "response.completed")
        final = events[-1].response
        self.assertEqual([e.sequence_number for e in events], list(range(len(events))))
        deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        self.assertEqual(deltas, chat.choices[0].message.content)
        self.assertEqual(final.output_text, chat.choices[0].message.content)
        self.assertEqual(final.usage.output_tokens, chat.usage.completion_tokens)

    def test_responses_api_logprobs_equal_the_chat_apis(self):
        chat = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": QUESTION}], max_tokens=6,
            temperature=0, logprobs=True, top_logprobs=2)
        expected = [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs])
                    for t in chat.choices[0].logprobs.content]
        for stream in (False, True):
            with self.subTest(stream=stream):
                kwargs = {"model": self.model, "input": QUESTION, "max_output_tokens": 6,
                          "temperature": 0, "top_logprobs": 2,
                          "include": ["message.output_text.logprobs"]}
                if stream:
                    with self.client.responses.stream(**kwargs) as events:
                        response = list(events)[-1].response
                else:
                    response = self.client.responses.create(**kwargs)
                got = [(t.token, t.logprob, [(a.token, a.logprob) for a in t.top_logprobs])
                       for t in response.output[0].content[0].logprobs]
                self.assertEqual(got, expected)

    def test_responses_api_tools_and_structured_output(self):
        tools = [{"type": "function", "name": "get_weather", "description": "The weather",
                  "parameters": {"type": "object", "properties": {
                      "city": {"type": "string", "maxLength": 30}},
                      "required": ["city"], "additionalProperties": False}, "strict": True}]
        question = "What is the weather in Paris?"
        called = self.client.responses.create(
            model=self.model, input=question, tools=tools, tool_choice="required",
            max_output_tokens=60, temperature=0)
        [call] = [item for item in called.output if item.type == "function_call"]
        self.assertEqual(call.name, "get_weather")
        self.assertIsInstance(json.loads(call.arguments)["city"], str)
        # Streamed: the same call, as function_call items.
        with self.client.responses.stream(model=self.model, input=question, tools=tools,
                                          tool_choice="required", max_output_tokens=60,
                                          temperature=0) as stream:
            streamed = stream.get_final_response()
        [streamed_call] = [i for i in streamed.output if i.type == "function_call"]
        self.assertEqual((streamed_call.name, streamed_call.arguments),
                         (call.name, call.arguments))
        # An agent's next turn: the response's own output items, then the call's output.
        answer = self.client.responses.create(
            model=self.model, tools=tools, max_output_tokens=12, temperature=0,
            input=[{"role": "user", "content": question}, *called.output,
                   {"type": "function_call_output", "call_id": call.call_id,
                    "output": "18 degrees and sunny"}])
        self.assertGreater(answer.usage.output_tokens, 0)
        self.assertGreater(answer.usage.input_tokens, called.usage.input_tokens)

        short = pydantic.Field(max_length=40)

        class City(pydantic.BaseModel):
            city: str = short
            country: str = short

        parsed = self.client.responses.parse(model=self.model, input=QUESTION, text_format=City,
                                             max_output_tokens=200, temperature=0)
        self.assertIsInstance(parsed.output_parsed, City)

        for kwargs, param in (({"previous_response_id": "resp_1"}, "previous_response_id"),
                              ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
                              ({"reasoning": {"effort": "low"}}, "reasoning"),
                              ({"top_logprobs": 21}, "top_logprobs"),
                              ({"input": [{"type": "input_image", "image_url": "x"}]},
                               "input[0].type")):
            with self.subTest(param=param), self.assertRaises(openai.BadRequestError) as refused:
                self.client.responses.create(**{"model": self.model, "input": "hi", **kwargs})
            self.assertEqual(refused.exception.body["param"], param)

    def test_json_object_and_schema_streamed(self):
        answer = self.client.chat.completions.create(
            model=self.model,
            messages=[{"role": "user", "content": "Give a JSON object with the keys name and "
                                                  "color for a cat."}],
            response_format={"type": "json_object"}, max_tokens=300, temperature=0)
        choice = answer.choices[0]
        self.assertEqual(choice.finish_reason, "stop", choice.message.content)
        self.assertIsInstance(json.loads(choice.message.content), dict)
        schema = {"type": "object", "properties": {
            "answer": {"enum": ["yes", "no"]}, "confidence": {"type": "integer", "minimum": 0,
                                                             "maximum": 100}},
                  "required": ["answer", "confidence"], "additionalProperties": False}
        format = {"type": "json_schema",
                  "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
        messages = [{"role": "user", "content": "Is the sky blue?"}]
        whole = self.client.chat.completions.create(
            model=self.model, messages=messages, response_format=format, max_tokens=100,
            temperature=0)
        text = "".join(c.choices[0].delta.content or "" for c in self.client.chat.completions.create(
            model=self.model, messages=messages, response_format=format, max_tokens=100,
            temperature=0, stream=True) if c.choices)
        self.assertEqual(text, whole.choices[0].message.content)
        verdict = json.loads(text)
        self.assertEqual(set(verdict), {"answer", "confidence"})
        self.assertIn(verdict["answer"], ("yes", "no"))
        self.assertTrue(0 <= verdict["confidence"] <= 100)

    def test_required_tool_calls_whole_streamed_and_in_the_history(self):
        tools = [
            {"type": "function", "function": {
                "name": "get_weather", "description": "The weather in a city",
                "parameters": {"type": "object", "properties": {
                    "city": {"type": "string", "maxLength": 30},
                    "unit": {"enum": ["celsius", "fahrenheit"]}},
                    "required": ["city", "unit"], "additionalProperties": False}}},
            {"type": "function", "function": {
                "name": "get_time", "parameters": {"type": "object", "properties": {
                    "zone": {"type": "string", "maxLength": 20}}, "required": ["zone"]}}}]
        messages = [{"role": "user", "content": "What is the weather in Paris?"}]
        for choice, names in (("required", ("get_weather", "get_time")),
                              ({"type": "function", "function": {"name": "get_time"}},
                               ("get_time",))):
            with self.subTest(choice=choice):
                answer = self.client.chat.completions.create(
                    model=self.model, messages=messages, tools=tools, tool_choice=choice,
                    max_tokens=120, temperature=0)
                self.assertEqual(answer.choices[0].finish_reason, "tool_calls")
                self.assertIsNone(answer.choices[0].message.content)
                [call] = answer.choices[0].message.tool_calls
                self.assertIn(call.function.name, names)
                arguments = json.loads(call.function.arguments)
                self.assertIsInstance(arguments, dict)
                stream = self.client.chat.completions.create(
                    model=self.model, messages=messages, tools=tools, tool_choice=choice,
                    max_tokens=120, temperature=0, stream=True)
                streamed, finish = {}, None
                for chunk in stream:
                    for c in chunk.choices:
                        finish = c.finish_reason or finish
                        for delta in c.delta.tool_calls or []:
                            entry = streamed.setdefault(delta.index, {"name": "", "arguments": ""})
                            entry["name"] += delta.function.name or ""
                            entry["arguments"] += delta.function.arguments or ""
                self.assertEqual(finish, "tool_calls")
                self.assertEqual(streamed, {0: {"name": call.function.name,
                                                "arguments": call.function.arguments}})
        # The agent's next turn: the call and its result in the history.
        history = messages + [
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": call.id, "type": "function",
                 "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
            {"role": "tool", "tool_call_id": call.id, "content": "18 degrees and sunny"}]
        answer = self.client.chat.completions.create(
            model=self.model, messages=history, tools=tools, max_tokens=30, temperature=0)
        self.assertIn(answer.choices[0].finish_reason, ("stop", "length", "tool_calls"))
        # As OpenAI's guides write an agent's loop: the SDK's own message objects appended to the
        # history (the call as the answer gave it, then a plain answer), sent back as the SDK
        # serializes them.
        called = self.client.chat.completions.create(
            model=self.model, messages=messages, tools=tools, tool_choice="required",
            max_tokens=120, temperature=0).choices[0].message
        loop = messages + [called, {"role": "tool", "tool_call_id": called.tool_calls[0].id,
                                    "content": "18 degrees and sunny"}]
        said = self.client.chat.completions.create(
            model=self.model, messages=loop, tools=tools, tool_choice="none", max_tokens=8,
            temperature=0).choices[0].message
        # And as frameworks that keep plain dicts store them: model_dump(), nulls included.
        loop += [said.model_dump(), {"role": "user", "content": "Thanks."}]
        again = self.client.chat.completions.create(
            model=self.model, messages=loop, max_tokens=4, temperature=0)
        self.assertGreater(again.usage.completion_tokens, 0)

    def test_bad_response_formats_are_named(self):
        messages = [{"role": "user", "content": "hi"}]
        for format in ({"type": "xml"},
                       {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                           "type": "object", "properties": {"a": {"type": "string",
                                                                  "multipleOf": 2}}}}},
                       {"type": "json_schema", "json_schema": {"name": "x", "schema": {
                           "$ref": "#/$defs/missing"}}}):
            with self.subTest(format=format):
                with self.assertRaises(openai.BadRequestError) as caught:
                    self.client.chat.completions.create(model=self.model, messages=messages,
                                                        response_format=format)
                self.assertTrue(caught.exception.body["param"].startswith("response_format"),
                                caught.exception.body)
        # The server still serves.
        self.assertTrue(self.client.chat.completions.create(
            model=self.model, messages=messages, max_tokens=2).choices)

    def test_a_dropped_stream_gives_its_kv_blocks_back(self):
        stream = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "Write a long story."}],
            max_tokens=2000, temperature=0, stream=True)
        received = 0
        for chunk in stream:
            received += 1
            if received == 3:
                break
        stream.close()
        deadline = time.monotonic() + LIVENESS_S
        while True:
            info = SERVER.info()
            # The cancellation is counted when the engine lets the request go: wait for it too.
            if (info["kv_blocks_free"] == info["kv_blocks_total"] and info["num_running"] == 0
                    and int(info.get("requests_cancelled", 0)) >= 1):
                break
            self.assertLess(time.monotonic(), deadline, f"KV blocks still held: {info}")
            time.sleep(0.2)
        self.assertGreaterEqual(int(info["requests_cancelled"]), 1)

    def test_malformed_requests_and_garbage(self):
        def post(body, content_length=None):
            length = len(body) if content_length is None else content_length
            return SERVER.raw(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Type: application/json\r\nConnection: close\r\n"
                              + f"Content-Length: {length}\r\n\r\n".encode() + body)

        reply = post(b"{not json")
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:200])
        self.assertIn(b"not valid JSON", reply)
        reply = post(b'{"messages": "hi"}')
        self.assertTrue(reply.startswith(b"HTTP/1.1 400"), reply[:200])
        self.assertIn(b'"param":"messages"', reply)
        reply = post(b"{}", content_length=64 * 1024 * 1024)
        self.assertTrue(reply.startswith(b"HTTP/1.1 413"), reply[:200])
        reply = SERVER.raw(os.urandom(4096))
        self.assertTrue(reply == b"" or reply.startswith(b"HTTP/1.1 400"), reply[:200])
        reply = SERVER.raw(b"GET /v1/nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        self.assertTrue(reply.startswith(b"HTTP/1.1 404"), reply[:200])
        # Still serving.
        answer = self.client.chat.completions.create(
            model=self.model, messages=[{"role": "user", "content": "hi"}], max_tokens=4)
        self.assertLessEqual(answer.usage.completion_tokens, 4)
        self.assertGreater(answer.usage.completion_tokens, 0)


class OpenAiAgentsTest(unittest.TestCase):
    """OpenAI's Agents SDK (openai-agents) on convoyd: an agent's runs through the Responses API
    and through Chat Completions, plain, streamed, with a function tool and with a structured
    output type. The small model is held to its task: greedy, the tool forced (the run stops at
    the tool's answer), the strings bounded. Each test runs in one event loop, with a client of
    its own (an async client's connections belong to the loop that opened them)."""

    @classmethod
    def setUpClass(cls):
        agents.set_tracing_disabled(True)  # the SDK would send traces to OpenAI
        cls.base_url = f"http://127.0.0.1:{SERVER.http_port}/v1"
        cls.direct = openai.OpenAI(base_url=cls.base_url, api_key="unused", max_retries=0,
                                   timeout=LIVENESS_S)
        cls.name = cls.direct.models.list().data[0].id

    def setUp(self):
        self.clients = []

    async def closed(self, result):
        """`result`, once every client made in this loop is closed."""
        for client in self.clients:
            await client.close()
        self.clients = []
        return result

    def agent(self, way, **kwargs):
        """An agent on the API `way` (responses, chat) through a new client; model settings in
        `settings`."""
        client = openai.AsyncOpenAI(base_url=self.base_url, api_key="unused", max_retries=0,
                                    timeout=LIVENESS_S)
        self.clients.append(client)  # closed by closed(), in the loop that used it
        model = (agents.OpenAIResponsesModel if way == "responses"
                 else agents.OpenAIChatCompletionsModel)(model=self.name, openai_client=client)
        settings = agents.ModelSettings(temperature=0, **kwargs.pop("settings", {}))
        return agents.Agent(name="assistant", instructions="Answer in a few words.", model=model,
                            model_settings=settings, **kwargs)

    def test_an_agent_answers_as_the_api_does(self):
        question = "What is the capital of France?"
        expected = self.direct.chat.completions.create(
            model=self.name, messages=[{"role": "system", "content": "Answer in a few words."},
                                       {"role": "user", "content": question}],
            max_completion_tokens=16, temperature=0).choices[0].message.content

        async def run(agent):
            whole = await agents.Runner.run(agent, question)
            streamed = agents.Runner.run_streamed(agent, question)
            deltas = []
            async for event in streamed.stream_events():
                if (event.type == "raw_response_event"
                        and event.data.type == "response.output_text.delta"):
                    deltas.append(event.data.delta)
            return await self.closed((whole.final_output, streamed.final_output, "".join(deltas)))

        for way in ("responses", "chat"):
            with self.subTest(way=way):
                agent = self.agent(way, settings={"max_tokens": 16})
                self.assertEqual(asyncio.run(run(agent)), (expected, expected, expected))

    def test_an_agent_calls_its_tool_and_takes_a_structured_answer(self):
        calls = []

        @agents.function_tool
        def get_weather(city: typing.Annotated[str, pydantic.Field(max_length=30)]) -> str:
            """The weather in a city."""
            calls.append(city)
            return f"sunny in {city}"

        short = pydantic.Field(max_length=40)

        class City(pydantic.BaseModel):
            city: str = short
            country: str = short

        async def run(way):
            tool_agent = self.agent(way, tools=[get_weather],
                                    tool_use_behavior="stop_on_first_tool",
                                    settings={"tool_choice": "required", "max_tokens": 80})
            called = await agents.Runner.run(tool_agent, "What is the weather in Paris?")
            typed = self.agent(way, output_type=City, settings={"max_tokens": 200})
            typed_output = (await agents.Runner.run(typed, QUESTION)).final_output
            return await self.closed((called.final_output, typed_output))

        for way in ("responses", "chat"):
            with self.subTest(way=way):
                calls.clear()
                called, typed = asyncio.run(run(way))
                self.assertEqual(len(calls), 1)
                self.assertEqual(called, f"sunny in {calls[0]}")
                self.assertIsInstance(typed, City)


if __name__ == "__main__":
    if not os.path.exists(MODEL):
        sys.exit(f"{MODEL} is missing: run scripts/fetch-default-model.sh (scripts/test.sh does)")
    SERVER = Server()
    try:
        result = unittest.main(exit=False, verbosity=2).result
    finally:
        code = SERVER.stop()
    if code != 0:
        print(f"convoyd exited {code} after SIGTERM; its log:\n{open(SERVER.log).read()}")
    shutil.rmtree(SERVER.dir, ignore_errors=True)
    sys.exit(0 if result.wasSuccessful() and code == 0 else 1)
