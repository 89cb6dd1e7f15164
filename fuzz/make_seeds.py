#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (fuzz/corpus/<target>/) and dictionaries (fuzz/dict/).

Run from anywhere: python3 fuzz/make_seeds.py. Every seed is small (a few hundred bytes to a few
KB) and made here from the project's own configs, fixtures and formats; the output is committed,
so this only needs to run again when a format changes.
"""
import json
import pathlib
import re
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DICT = ROOT / "fuzz" / "dict"


def write(target, name, data):
    path = CORPUS / target / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def write_dict(name, tokens):
    DICT.mkdir(parents=True, exist_ok=True)
    # libFuzzer's dictionary syntax: printable ASCII, other bytes (UTF-8 too) as \xNN.
    def escape(token):
        return "".join(chr(b) if 0x20 <= b < 0x7F and b not in b'"\\' else "\\x%02x" % b
                       for b in token.encode())
    lines = ['"%s"' % escape(t) for t in sorted(set(tokens))]
    (DICT / name).write_text("\n".join(lines) + "\n")


# --- server configs: the shipped ones, smallest first --------------------------------------
def server_config():
    for name in ["static", "throughput", "latency", "mixed", "default"]:
        write("server_config_fuzzer", name + ".pbtxt", (ROOT / "configs" / (name + ".pbtxt")).read_text())
    proto = (ROOT / "proto" / "convoy" / "v1" / "server_config.proto").read_text()
    fields = re.findall(r"^\s+(?:optional |repeated )?\w+ (\w+) = \d+;", proto, re.M)
    write_dict("server_config.dict", [f + ": " for f in fields] + [f + " {" for f in fields] +
               ["}", "true", "false", "-1", "4294967296", "18446744073709551615", "1e400", "nan"])


# --- safetensors --------------------------------------------------------------------------
def safetensors_bytes(tensors, metadata=True, pad=True):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = {"format": "pt"}
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def safetensors():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.25)
    write("safetensors_fuzzer", "f32.safetensors", safetensors_bytes([("w", "F32", [2, 2], f32)]))
    write("safetensors_fuzzer", "mixed.safetensors", safetensors_bytes([
        ("model.norm.weight", "F16", [3], struct.pack("<3e", 1, 2, 3)),
        ("model.embed_tokens.weight", "BF16", [2, 2], bytes([0, 0x3f, 0x80, 0x3f, 0, 0x40, 0x80, 0xbf])),
        ("scalar", "F32", [], struct.pack("<f", 7.0)),
        ("empty", "F32", [0, 4], b"")]))
    write("safetensors_fuzzer", "unpadded.safetensors",
          safetensors_bytes([("a", "F16", [1], b"\x00\x3c")], metadata=False, pad=False))
    write_dict("safetensors.dict", ['"dtype"', '"shape"', '"data_offsets"', '"__metadata__"',
                                    '"F32"', '"F16"', '"BF16"', '"I64"', "[0,", "]", "{", "}"])


# --- GGUF -----------------------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gvalue(vtype, value):
    fmt = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
           U64: "<Q", I64: "<q", F64: "<d"}
    if vtype == STR:
        return gstr(value)
    if vtype == ARR:
        etype, items = value
        return struct.pack("<IQ", etype, len(items)) + b"".join(gvalue(etype, v) for v in items)
    return struct.pack(fmt[vtype], value)


def gguf_bytes(metadata, tensors, alignment=32):
    """metadata: [(key, type, value)]; tensors: [(name, ggml_type, dims innermost first, bytes)]."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata))
    for key, vtype, value in metadata:
        out += gstr(key) + struct.pack("<I", vtype) + gvalue(vtype, value)
    offset, data = 0, b""
    for name, gtype, dims, raw in tensors:
        out += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", gtype, offset)
        pad = -len(raw) % alignment
        data += raw + b"\0" * pad
        offset += len(raw) + pad
    out += b"\0" * (-len(out) % alignment)
    return out + data


def floats(n, scale=0.1):
    return struct.pack("<%df" % n, *[((i * 7) % 11 - 5) * scale for i in range(n)])


def gguf():
    hidden, heads, kv_heads, ff, vocab = 4, 2, 1, 8, 8
    tokens = ["<|endoftext|>", "a", "b", "ab", "\u0120", "\u0120a", "<|im_start|>", "<|im_end|>"]
    metadata = [
        ("general.architecture", STR, "llama"),
        ("general.alignment", U32, 32),
        ("llama.context_length", U32, 64),
        ("llama.embedding_length", U32, hidden),
        ("llama.block_count", U32, 1),
        ("llama.feed_forward_length", U32, ff),
        ("llama.attention.head_count", U32, heads),
        ("llama.attention.head_count_kv", U32, kv_heads),
        ("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
        ("llama.rope.freq_base", F32, 10000.0),
        ("llama.rope.dimension_count", U32, hidden // heads),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.pre", STR, "smollm"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.token_type", ARR, (I32, [3, 1, 1, 1, 1, 1, 3, 3])),
        ("tokenizer.ggml.merges", ARR, (STR, ["a b", "\u0120 a"])),
        ("tokenizer.ggml.bos_token_id", U32, 0),
        ("tokenizer.ggml.eos_token_id", U32, 7),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
        ("tokenizer.chat_template", STR,
         "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
         "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"),
    ]
    t = [("token_embd.weight", 0, [hidden, vocab], floats(hidden * vocab)),
         ("output_norm.weight", 0, [hidden], floats(hidden, 1.0)),
         ("blk.0.attn_norm.weight", 0, [hidden], floats(hidden, 1.0)),
         ("blk.0.attn_q.weight", 0, [hidden, hidden], floats(hidden * hidden)),
         ("blk.0.attn_k.weight", 0, [hidden, kv_heads * hidden // heads], floats(hidden * 2)),
         ("blk.0.attn_v.weight", 0, [hidden, kv_heads * hidden // heads], floats(hidden * 2)),
         ("blk.0.attn_output.weight", 0, [hidden, hidden], floats(hidden * hidden)),
         ("blk.0.ffn_norm.weight", 0, [hidden], floats(hidden, 1.0)),
         ("blk.0.ffn_gate.weight", 0, [hidden, ff], floats(hidden * ff)),
         ("blk.0.ffn_up.weight", 0, [hidden, ff], floats(hidden * ff)),
         ("blk.0.ffn_down.weight", 0, [ff, hidden], floats(hidden * ff))]
    write("gguf_fuzzer", "tiny_llama.gguf", gguf_bytes(metadata, t))
    # The same model 256 wide (head size 4 through attention.key_length, so that few rows are 256
    # long) with its products in Q2_K and Q3_K blocks: QuantMatmul's paths on those two types.
    wide = {"llama.embedding_length": 256, "llama.feed_forward_length": ff,
            "llama.rope.dimension_count": 4}
    k_metadata = [(key, vt, wide.get(key, v)) for key, vt, v in metadata]
    k_metadata += [("llama.attention.key_length", U32, 4), ("llama.attention.value_length", U32, 4)]

    def k_blocks(rows, block_bytes, halves):
        out = b""
        for r in range(rows):
            block = bytearray((i * 11 + r * 7) % 256 for i in range(block_bytes))
            for at in halves:
                block[at:at + 2] = struct.pack("<e", 0.01 * (r + 1))
            out += bytes(block)
        return out

    q2_k = lambda rows: k_blocks(rows, 84, [80, 82])
    q3_k = lambda rows: k_blocks(rows, 110, [108])
    f16 = lambda n: struct.pack("<%de" % n, *[((i * 7) % 11 - 5) * 0.1 for i in range(n)])
    t = [("token_embd.weight", 10, [256, vocab], q2_k(vocab)),
         ("output_norm.weight", 0, [256], floats(256, 1.0)),
         ("blk.0.attn_norm.weight", 0, [256], floats(256, 1.0)),
         ("blk.0.attn_q.weight", 10, [256, heads * 4], q2_k(heads * 4)),
         ("blk.0.attn_k.weight", 11, [256, kv_heads * 4], q3_k(kv_heads * 4)),
         ("blk.0.attn_v.weight", 11, [256, kv_heads * 4], q3_k(kv_heads * 4)),
         ("blk.0.attn_output.weight", 1, [heads * 4, 256], f16(heads * 4 * 256)),
         ("blk.0.ffn_norm.weight", 0, [256], floats(256, 1.0)),
         ("blk.0.ffn_gate.weight", 10, [256, ff], q2_k(ff)),
         ("blk.0.ffn_up.weight", 11, [256, ff], q3_k(ff)),
         ("blk.0.ffn_down.weight", 1, [ff, 256], f16(ff * 256))]
    write("gguf_fuzzer", "q2_k_q3_k_llama.gguf", gguf_bytes(k_metadata, t))
    # One tensor of each block layout, and one value of each metadata type.
    q8_0 = struct.pack("<e", 0.5) + bytes((i * 5) % 256 for i in range(32))
    q4_k = bytes((i * 13) % 256 for i in range(144))
    q6_k = bytes((i * 29) % 256 for i in range(210))
    q4_0 = struct.pack("<e", 0.25) + bytes((i * 3) % 256 for i in range(16))
    types = [("u8", U8, 200), ("i8", I8, -3), ("u16", U16, 60000), ("i16", I16, -30000),
             ("u32", U32, 4000000000), ("i32", I32, -7), ("f32", F32, 1.5), ("bool", BOOL, True),
             ("str", STR, "h\u00e9llo"), ("u64", U64, 2**63 + 1), ("i64", I64, -2**40),
             ("f64", F64, 2.5), ("arr_i16", ARR, (I16, [1, -2, 3])), ("arr_str", ARR, (STR, ["x", ""])),
             ("arr_f32", ARR, (F32, [0.5]))]
    tensors = [("q8_0", 8, [32, 1], q8_0), ("q4_k", 12, [256], q4_k), ("q6_k", 14, [256], q6_k),
               ("q4_0", 2, [32], q4_0), ("f16", 1, [2, 2], struct.pack("<4e", 1, 2, 3, 4)),
               ("bf16", 30, [2], bytes([0x80, 0x3f, 0, 0x40]))]
    write("gguf_fuzzer", "types.gguf", gguf_bytes([("t." + k, vt, v) for k, vt, v in types], tensors))
    write("gguf_fuzzer", "empty.gguf", gguf_bytes([], []))
    write_dict("gguf.dict", ["GGUF", "\x03\x00\x00\x00", "\x02\x00\x00\x00"] + [k for k, _, _ in metadata] +
               ["general.alignment", "llama.rope.scaling.type", "llama.rope.scaling.factor", "linear", "yarn",
                "llama.expert_count", "llama.attention.key_length", "llama.attention.value_length",
                "tokenizer.ggml.scores", "tokenizer.ggml.unknown_token_id", "tokenizer.ggml.padding_token_id",
                "tokenizer.ggml.add_space_prefix", "tokenizer.ggml.add_eos_token", "rope_freqs.weight",
                "output.weight", "llama", "gpt2", "qwen2", "llama-bpe"])


# --- tokenizer: selector byte, then text ----------------------------------------------------
def tokenizer():
    texts = ["Hello world, the theory 12345 of abc!", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600\n\n  x",
             "<|im_start|>user\nhi<|im_end|><|endoftext|>", "\u2581the\tab  \r\n'll 've",
             "\xff\xfe bad utf-8 \xc3"]
    for i, text in enumerate(texts):
        data = text.encode("latin-1") if i == 4 else text.encode()
        write("tokenizer_fuzzer", "text%d" % i, bytes([i * 5 % 16]) + data)
    write("tokenizer_fuzzer", "ids", bytes([8]) + bytes(range(0, 200, 3)))
    write_dict("tokenizer.dict", ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<s>", "</s>",
                                  "<unk>", "<0x41>", "\u2581", "\u0120", "'s", "'ll", "\r\n", "  "])


# --- tokenizer.json: shrunken fixtures -------------------------------------------------------
def shrink_bpe(model, keep):
    vocab = model["vocab"]
    kept = {t: i for t, i in vocab.items() if i < keep}
    merges = []
    for m in model["merges"]:
        left, right = m.split(" ", 1) if isinstance(m, str) else m
        if left in kept and right in kept and left + right in kept:
            merges.append(m)
    out = dict(model)
    out["vocab"], out["merges"] = kept, merges[:24]
    return out


def tokenizer_json():
    base = ROOT / "tests" / "fixtures" / "tokenizer"
    for name, keep in [("smollm2", 80), ("sp", 300)]:
        full = json.loads((base / name / "tokenizer.json").read_text())
        full["model"] = shrink_bpe(full["model"], keep)
        if name == "sp":  # the special tokens, the byte tokens of "<0x20>".."<0x5A>", a few pieces
            full["model"]["vocab"] = {t: i for t, i in full["model"]["vocab"].items()
                                      if i < 5 or 0x27 <= i < 0x61 or 261 <= i}
        full["added_tokens"] = [a for a in full["added_tokens"] if a["id"] < keep][:4]
        text = json.dumps(full, ensure_ascii=False, separators=(",", ":"))
        write("tokenizer_json_fuzzer", name + ".json", text)
    # Variants: each replaces parts of a base tokenizer.json.
    for variant in ["smollm2_split_removed", "sp_decoder_strip_two", "smollm2_prefix_space_roberta",
                    "sp_added_tokens"]:
        v = json.loads((base / "variants" / (variant + ".json")).read_text())
        small = json.loads((CORPUS / "tokenizer_json_fuzzer" / (v["base"] + ".json")).read_text())
        for key, value in v["replace"].items():
            small[key] = value
        write("tokenizer_json_fuzzer", variant + ".json",
              json.dumps(small, ensure_ascii=False, separators=(",", ":")))
    write_dict("tokenizer_json.dict", [
        '"model"', '"type"', '"BPE"', '"vocab"', '"merges"', '"byte_fallback"', '"unk_token"',
        '"ignore_merges"', '"added_tokens"', '"special"', '"normalized"', '"lstrip"', '"rstrip"',
        '"single_word"', '"normalizer"', '"pre_tokenizer"', '"post_processor"', '"decoder"',
        '"Sequence"', '"Prepend"', '"Replace"', '"ByteLevel"', '"Split"', '"Digits"', '"Metaspace"',
        '"TemplateProcessing"', '"RobertaProcessing"', '"BertProcessing"', '"ByteFallback"',
        '"Fuse"', '"Strip"', '"pattern"', '"String"', '"Regex"', '"behavior"', '"Isolated"',
        '"Removed"', '"MergedWithPrevious"', '"MergedWithNext"', '"Contiguous"', '"invert"',
        '"add_prefix_space"', '"trim_offsets"', '"use_regex"', '"individual_digits"',
        '"replacement"', '"prepend_scheme"', '"first"', '"always"', '"never"', '"split"',
        '"content"', '"start"', '"stop"', '"single"', '"pair"', '"special_tokens"', '"SpecialToken"',
        '"Sequence"', '"id"', '"ids"', '"tokens"', '"sep"', '"cls"', "null", "true", "false"])


# --- chat templates: small real ones ------------------------------------------------------
def chat_template():
    fixtures = ROOT / "tests" / "fixtures" / "chat_template"
    for name in ["chatml_qwen2", "llama2", "mistral_v0_1", "zephyr", "smollm2", "llama3"]:
        template = json.loads((fixtures / (name + ".json")).read_text())["template"]
        write("chat_template_fuzzer", name + ".jinja", template)
    write("chat_template_fuzzer", "features.jinja",
          "{%- set ns = namespace(n=0) -%}{% for m in messages | reverse if m.role != 'x' %}"
          "{{ loop.index }}:{{ m.content | trim | upper | length }}{% if loop.last %}!{% endif %}"
          "{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}{{ (tools | tojson) if tools }}"
          "{{ raise_exception('no') if messages | length > 10 }}{{ strftime_now('%Y-%m-%d') }}"
          "{{ [1, 2, 3][1:] | join(',') }}{{ {'a': 1}.items() | list }}{{ 'a b'.split(' ') }}"
          "{% generation %}x{% endgeneration %}{{ bos_token ~ eos_token }}")
    write_dict("chat_template.dict", [
        "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "for", "in", "endfor", "if", "elif",
        "else", "endif", "set", "namespace", "loop.index", "loop.first", "loop.last", "messages",
        "message['role']", "message['content']", "add_generation_prompt", "raise_exception(",
        "strftime_now(", "tools", "bos_token", "eos_token", "| tojson", "| trim", "| length",
        "| join(", "| reverse", "| upper", "| lower", "| default(", "| list", "| items", "is defined",
        "is none", "is string", "not", "and", "or", "~", "*", "[::-1]", "break", "continue",
        "generation", "endgeneration", "range(", ".startswith(", ".split(", ".strip(", "macro",
        "call", "filter", "with", "recursive"])


# --- requests --------------------------------------------------------------------------------
def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out


def field(number, wire, payload):
    key = varint(number << 3 | wire)
    if wire == 2:
        return key + varint(len(payload)) + payload
    return key + payload


def request_validation():
    packed = lambda ids: field(2, 2, b"".join(varint(i) for i in ids))
    sampling = (field(1, 0, varint(16)) + field(2, 5, struct.pack("<f", 0.7)) + field(3, 0, varint(40)) +
                field(4, 5, struct.pack("<f", 0.9)) + field(5, 0, varint(1234)) +
                field(6, 2, varint(7)) + field(7, 2, b"\n\n"))
    write("request_validation_fuzzer", "ids", field(1, 2, b"tiny") + packed([1, 2, 3, 200]) +
          field(4, 2, sampling) + field(5, 0, varint(2)) + field(6, 0, varint(1000000)))
    write("request_validation_fuzzer", "text", field(3, 2, "Hello, the world".encode()) +
          field(7, 0, varint(1)) + field(8, 0, varint(3)) + field(9, 2, b"client-1") +
          field(11, 0, varint(1)) + field(12, 0, varint(0)))
    message = lambda role, content: field(10, 2, field(1, 2, role.encode()) + field(2, 2, content.encode()))
    write("request_validation_fuzzer", "messages", message("system", "Be brief.") +
          message("user", "Hi <|im_end|> there") + field(4, 2, field(1, 0, varint(4))))
    write_dict("request_validation.dict", ["tiny", "system", "user", "assistant", "<|im_end|>"])


def openai_request():
    chat = {"model": "tiny", "messages": [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hi"}]}], "max_tokens": 8,
            "temperature": 0.5, "top_p": 0.9, "seed": 7, "stop": ["\n", "END"], "stream": True,
            "stream_options": {"include_usage": True}, "logprobs": True, "top_logprobs": 2, "user": "u"}
    completion = {"model": "tiny", "prompt": "Hello the world", "max_tokens": 4, "top_k": -1,
                  "logprobs": 2, "stop": "x", "priority": 1, "n": 1}
    ids = {"prompt": [[1, 2, 3]], "max_completion_tokens": 3}
    write("openai_request_fuzzer", "chat", b"\x00" + json.dumps(chat).encode())
    write("openai_request_fuzzer", "completion", b"\x01" + json.dumps(completion).encode())
    write("openai_request_fuzzer", "ids", b"\x01" + json.dumps(ids).encode())
    keys = set(chat) | set(completion) | set(ids) | {"role", "content", "type", "text", "tools",
                                                     "logit_bias", "presence_penalty", "echo",
                                                     "suffix", "response_format", "include_usage"}
    write_dict("openai_request.dict", ['"%s":' % k for k in keys] +
               ["null", "true", "false", "[]", "{}", "-1", "1e999", "2147483648"])


if __name__ == "__main__":
    for make in [server_config, safetensors, gguf, tokenizer, tokenizer_json, chat_template,
                 request_validation, openai_request]:
        make()
    for target in sorted(CORPUS.iterdir()):
        sizes = [p.stat().st_size for p in target.iterdir()]
        print("%-28s %2d files, %6d bytes" % (target.name, len(sizes), sum(sizes)))
