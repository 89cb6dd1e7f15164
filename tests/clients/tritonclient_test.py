"""convoyd through Triton's own Python client (tritonclient[grpc]), as a Triton user would call it.

Starts convoyd on a random-weight model with SmolLM2's tokenizer (written with convoy-mkmodel),
then checks readiness, metadata and config, infer() and a streamed async_stream_infer() against
convoy's own API (`convoy generate --json`) for the same request, and an error; and that
proto/inference/ declares every message and field as tritonclient's own schema does. The model's
text is random: answers are compared between the two APIs, never with fixed strings.

Run by ctest (tests/clients/CMakeLists.txt) with the Python of scripts/test-venv.sh.
"""

import argparse
import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np
import tritonclient.grpc as grpcclient
from google.protobuf import descriptor_pb2
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import InferenceServerException

ARGS = None
DAEMON = None  # the running convoyd
LIVENESS_S = 60
PROMPT = "The capital of France is"


def read_text(path):
    """The file's text; empty when it does not exist (yet)."""
    try:
        with open(path) as f:
            return f.read()
    except FileNotFoundError:
        return ""


class Daemon:
    def __init__(self, workdir):
        self.workdir = workdir
        model = os.path.join(workdir, "model")
        subprocess.run(
            [ARGS.mkmodel, "--out", model, "--preset", "tiny", "--vocab-size", "49152",
             "--max-position", "1024", "--seed", "7"],
            check=True, stdout=subprocess.DEVNULL)
        shutil.copy(ARGS.tokenizer, os.path.join(model, "tokenizer.json"))
        self.model_name = "model"
        config = os.path.join(workdir, "config.pbtxt")
        with open(config, "w") as f:
            f.write("scheduler { max_batch_size: 64 max_num_batched_tokens: 4096 }\n"
                    "kv_cache { block_size: 16 memory_budget_bytes: 8388608 }\n"
                    "executor { device: CPU cpu_threads: 1 }\n")
        port_file = os.path.join(workdir, "port")
        self.log_path = os.path.join(workdir, "convoyd.log")
        with open(self.log_path, "w") as log:
            self.process = subprocess.Popen(
                [ARGS.convoyd, "--config", config, "--model", model, "--port", "0",
                 "--port-file", port_file, "--listen-address", "127.0.0.1",
                 "--http-port", "0", "--http-listen-address", "127.0.0.1", "--metrics-port", "0"],
                stdout=log, stderr=subprocess.STDOUT)
        give_up = time.monotonic() + LIVENESS_S
        while not read_text(port_file).endswith("\n"):
            self.check_running()
            if time.monotonic() > give_up:
                self.fail_with_log(f"convoyd did not listen within {LIVENESS_S} s")
            time.sleep(0.01)
        self.address = "127.0.0.1:" + read_text(port_file).strip()

    def check_running(self):
        if self.process.poll() is not None:
            self.fail_with_log(f"convoyd exited with {self.process.returncode}")

    def fail_with_log(self, reason):
        raise RuntimeError(f"{reason}; its log:\n{read_text(self.log_path)}")

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                return self.process.wait(timeout=LIVENESS_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                return None
        return self.process.returncode


def setUpModule():
    global DAEMON
    DAEMON = Daemon(tempfile.mkdtemp(prefix="convoy_tritonclient_",
                                      dir=os.environ.get("TEST_TMPDIR")))


def tearDownModule():
    code = DAEMON.stop()
    if code != 0:
        DAEMON.fail_with_log(f"convoyd exited with {code} after SIGTERM (expected 0)")
    shutil.rmtree(DAEMON.workdir, ignore_errors=True)


def convoy_generate(*flags):
    """convoy's own answer: `convoy generate --json` for the same request."""
    out = subprocess.run([ARGS.convoy, "generate", "--addr", DAEMON.address, "--json", *flags],
                         capture_output=True, text=True, timeout=LIVENESS_S)
    if out.returncode != 0:
        raise AssertionError(f"convoy generate {' '.join(flags)} exited {out.returncode}: "
                             f"{out.stderr.strip()}")
    return json.loads(out.stdout)


def text_input(prompt):
    tensor = grpcclient.InferInput("text_input", [1], "BYTES")
    tensor.set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
    return tensor


def scalar_input(name, value, datatype, dtype):
    tensor = grpcclient.InferInput(name, [1], datatype)
    tensor.set_data_from_numpy(np.array([value], dtype=dtype))
    return tensor


class TritonClientTest(unittest.TestCase):
    def setUp(self):
        self.client = grpcclient.InferenceServerClient(url=DAEMON.address)
        give_up = time.monotonic() + LIVENESS_S
        while not self.server_ready():
            DAEMON.check_running()
            if time.monotonic() > give_up:
                DAEMON.fail_with_log(f"convoyd was not ready within {LIVENESS_S} s")
            time.sleep(0.01)

    def tearDown(self):
        self.client.close()

    def server_ready(self):
        try:
            return self.client.is_server_ready()
        except InferenceServerException:
            return False

    def answer(self, result):
        ids = result.as_numpy("output_ids")
        text = result.as_numpy("text_output")
        return [int(i) for i in ids], text[0].decode()

    def test_readiness_metadata_and_config(self):
        self.assertTrue(self.client.is_server_live())
        self.assertTrue(self.client.is_model_ready(DAEMON.model_name))
        self.assertTrue(self.client.is_model_ready(DAEMON.model_name, "1"))
        self.assertFalse(self.client.is_model_ready("no_such_model"))
        server = self.client.get_server_metadata(as_json=True)
        self.assertEqual(server["name"], "convoy")
        metadata = self.client.get_model_metadata(DAEMON.model_name, as_json=True)
        self.assertEqual(metadata["versions"], ["1"])
        inputs = {t["name"]: t["datatype"] for t in metadata["inputs"]}
        outputs = {t["name"]: t["datatype"] for t in metadata["outputs"]}
        self.assertEqual(inputs["text_input"], "BYTES")
        self.assertEqual(inputs["max_tokens"], "INT32")
        self.assertEqual(outputs, {"text_output": "BYTES", "output_ids": "INT32"})
        config = self.client.get_model_config(DAEMON.model_name).config
        self.assertTrue(config.model_transaction_policy.decoupled)
        self.assertEqual(config.max_batch_size, 0)

    def test_infer_answers_as_convoy_generate(self):
        expected = convoy_generate("--prompt", PROMPT, "--max-tokens", "16")
        self.assertGreater(len(expected["token_ids"]), 0)
        # max_tokens as a request parameter, then as an input tensor.
        by_parameter = self.client.infer(DAEMON.model_name, [text_input(PROMPT)],
                                         parameters={"max_tokens": 16})
        by_input = self.client.infer(
            DAEMON.model_name,
            [text_input(PROMPT), scalar_input("max_tokens", 16, "INT32", np.int32)],
            outputs=[grpcclient.InferRequestedOutput("text_output"),
                     grpcclient.InferRequestedOutput("output_ids")])
        for result in (by_parameter, by_input):
            ids, text = self.answer(result)
            self.assertEqual(ids, expected["token_ids"])
            self.assertEqual(text, expected["text"])
        self.assertEqual(by_parameter.get_response().model_name, DAEMON.model_name)

    def test_sampling_parameters_mean_what_convoys_flags_mean(self):
        expected = convoy_generate("--prompt", PROMPT, "--max-tokens", "12", "--temperature",
                                   "0.75", "--top-k", "40", "--top-p", "0.9", "--seed", "11")
        result = self.client.infer(
            DAEMON.model_name,
            [text_input(PROMPT), scalar_input("seed", 11, "UINT64", np.uint64),
             scalar_input("top_p", 0.9, "FP32", np.float32)],
            parameters={"max_tokens": 12, "temperature": 0.75, "top_k": 40})
        ids, text = self.answer(result)
        self.assertEqual(ids, expected["token_ids"])
        self.assertEqual(text, expected["text"])

    def test_n_choices_answer_as_convoy_generate_n(self):
        expected = convoy_generate("--prompt", PROMPT, "--max-tokens", "12", "--temperature",
                                   "0.9", "--seed", "11", "--n", "3")
        self.assertEqual([c["index"] for c in expected["choices"]], [0, 1, 2])
        self.assertEqual([c["seed"] for c in expected["choices"]], [11, 12, 13])
        result = self.client.infer(
            DAEMON.model_name, [text_input(PROMPT)],
            parameters={"max_tokens": 12, "temperature": 0.9, "seed": 11, "n": 3})
        # A leading dimension of 3 choices; output_ids padded with -1 to the longest.
        ids = result.as_numpy("output_ids")
        texts = result.as_numpy("text_output")
        self.assertEqual(texts.shape, (3,))
        self.assertEqual(ids.shape[0], 3)
        for i, choice in enumerate(expected["choices"]):
            self.assertEqual([int(t) for t in ids[i] if t >= 0], choice["token_ids"])
            self.assertEqual(texts[i].decode(), choice["text"])
        finish = result.get_response().parameters["finish_reason"].string_param
        self.assertEqual(finish.split(","), [c["finish_reason"] for c in expected["choices"]])
        with self.assertRaises(InferenceServerException) as caught:
            self.client.infer(DAEMON.model_name, [text_input(PROMPT)], parameters={"n": 99})
        self.assertEqual(caught.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("parameters.n: 99 choices; this server allows at most 8 "
                      "(request_limits.max_choices)", caught.exception.message())

    def test_streamed_inference_answers_in_several_responses_then_a_final_one(self):
        expected = convoy_generate("--prompt", PROMPT, "--max-tokens", "24")
        responses = queue.Queue()
        self.client.start_stream(callback=lambda result, error: responses.put((result, error)))
        try:
            self.client.async_stream_infer(DAEMON.model_name, [text_input(PROMPT)],
                                           request_id="streamed", parameters={"max_tokens": 24})
            chunks = []
            while True:
                result, error = responses.get(timeout=LIVENESS_S)
                self.assertIsNone(error)
                response = result.get_response()
                self.assertEqual(response.id, "streamed")
                chunks.append(self.answer(result))
                if response.parameters["triton_final_response"].bool_param:
                    break
            # An error on the stream comes as a response's error, and the stream serves on.
            self.client.async_stream_infer(DAEMON.model_name, [text_input(PROMPT)],
                                           request_id="refused", parameters={"max_tokens": 0})
            result, error = responses.get(timeout=LIVENESS_S)
            self.assertIsNotNone(error)
            self.assertIn("parameters.max_tokens: must be at least 1", error.message())
            self.client.async_stream_infer(DAEMON.model_name, [text_input(PROMPT)],
                                           request_id="after", parameters={"max_tokens": 2})
            while True:
                result, error = responses.get(timeout=LIVENESS_S)
                self.assertIsNone(error)
                if result.get_response().parameters["triton_final_response"].bool_param:
                    break
        finally:
            self.client.stop_stream()
        self.assertGreaterEqual(len(chunks), 2)
        self.assertEqual([i for ids, _ in chunks for i in ids], expected["token_ids"])
        self.assertEqual("".join(text for _, text in chunks), expected["text"])

    def test_a_bad_request_is_invalid_argument_naming_the_parameter(self):
        with self.assertRaises(InferenceServerException) as caught:
            self.client.infer(DAEMON.model_name, [text_input(PROMPT)],
                              parameters={"max_tokens": 0})
        self.assertEqual(caught.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("parameters.max_tokens: must be at least 1, got 0",
                      caught.exception.message())
        with self.assertRaises(InferenceServerException) as caught:
            self.client.infer("no_such_model", [text_input(PROMPT)])
        self.assertEqual(caught.exception.status(), "StatusCode.INVALID_ARGUMENT")
        self.assertIn("model_name: unknown model 'no_such_model'", caught.exception.message())


class SchemaTest(unittest.TestCase):
    """proto/inference/ against the schema tritonclient was generated from."""

    def test_every_field_is_numbered_and_typed_as_tritonclients(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "inference.pb")
            subprocess.run([ARGS.protoc, "-I", ARGS.proto_dir, "--include_imports",
                            "--descriptor_set_out", out,
                            os.path.join(ARGS.proto_dir, "inference", "grpc_service.proto")],
                           check=True)
            ours = descriptor_pb2.FileDescriptorSet()
            with open(out, "rb") as f:
                ours.ParseFromString(f.read())
        theirs = {}
        for module in (service_pb2, model_config_pb2):
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            self.index(proto.message_type, "", theirs)
            for enum in proto.enum_type:
                theirs["enum " + enum.name] = enum
            for service in proto.service:
                theirs["service " + service.name] = service
        files = [f for f in ours.file if f.package == "inference"]
        self.assertEqual(len(files), 2)
        for proto in files:
            self.compare(proto.message_type, "", theirs)
            for enum in proto.enum_type:
                self.assertEqual([(v.name, v.number) for v in enum.value],
                                 [(v.name, v.number) for v in theirs["enum " + enum.name].value])
            for service in proto.service:
                methods = {m.name: m for m in theirs["service " + service.name].method}
                for m in service.method:
                    self.assertIn(m.name, methods)
                    t = methods[m.name]
                    self.assertEqual(
                        (m.input_type, m.output_type, m.client_streaming, m.server_streaming),
                        (t.input_type, t.output_type, t.client_streaming, t.server_streaming),
                        m.name)

    def index(self, messages, prefix, out):
        for m in messages:
            out[prefix + m.name] = m
            self.index(m.nested_type, prefix + m.name + ".", out)

    def compare(self, messages, prefix, theirs):
        for m in messages:
            name = prefix + m.name
            self.assertIn(name, theirs, "a message tritonclient does not have")
            fields = {f.name: f for f in theirs[name].field}
            for f in m.field:
                self.assertIn(f.name, fields, f"{name}.{f.name}")
                t = fields[f.name]
                self.assertEqual(
                    (f.number, f.type, f.label, f.type_name.split(".")[-1],
                     f.HasField("oneof_index")),
                    (t.number, t.type, t.label, t.type_name.split(".")[-1],
                     t.HasField("oneof_index")),
                    f"{name}.{f.name}")
            if name not in ("ModelConfig", "ModelInput", "ModelOutput"):
                # Every field of the protocol's messages (only these of Triton's model
                # configuration are a subset).
                self.assertEqual(len(m.field), len(fields), f"{name}: fields left out")
            self.compare(m.nested_type, name + ".", theirs)


def main():
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--convoyd", required=True)
    parser.add_argument("--convoy", required=True)
    parser.add_argument("--mkmodel", required=True)
    parser.add_argument("--tokenizer", required=True, help="SmolLM2's tokenizer.json")
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--protoc", required=True)
    ARGS, rest = parser.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
