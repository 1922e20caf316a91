#!/usr/bin/env python3
"""Writes the seed corpus of each fuzz target into fuzz/corpus/<target>/ (standard library only,
deterministic). Run from anywhere: python3 fuzz/make_corpus.py. The seeds are committed."""
import glob
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def target(name):
    path = os.path.join(HERE, "corpus", name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def write(folder, name, data):
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# -- config: the shipped configuration and small variations -------------------------------------
d = target("config")
with open(os.path.join(ROOT, "config", "conveyor.toml")) as f:
    write(d, "conveyor.toml", f.read())
write(d, "empty.toml", "")
write(d, "policy.toml", '[batcher]\npolicy = "seed"\nmax_queue = 8\n\n[[executors]]\ndevice = "cpu"\nslots = 4\n')
write(d, "model.toml", '[model]\npath = "synthetic:s15m"\ndtype = "bf16"\n\n[server]\nport = 8080\n')
write(d, "generation.toml", "[generation]\ntemperature = 0.0\ntop_p = 0.9\ntop_k = 40\nmax_tokens = 64\n")

# -- checkpoint: tiny llama2.c checkpoints (shared and separate classifier) ----------------------
d = target("checkpoint")


def checkpoint(dim, hidden, layers, heads, kv_heads, vocab, seq, shared):
    head = dim // heads
    kv_dim = head * kv_heads
    floats = (vocab * dim + layers * dim + layers * dim * dim + 2 * layers * dim * kv_dim +
              layers * dim * dim + layers * dim + 3 * layers * dim * hidden + dim + seq * head)
    if not shared:
        floats += vocab * dim
    header = struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab if shared else -vocab, seq)
    return header + b"".join(struct.pack("<f", ((i * 37) % 101 - 50) / 100.0) for i in range(floats))


write(d, "shared.bin", checkpoint(8, 16, 1, 2, 2, 16, 8, True))
write(d, "separate.bin", checkpoint(8, 16, 2, 2, 1, 16, 8, False))

# -- safetensors: small files of each dtype ------------------------------------------------------
d = target("safetensors")


def safetensors(tensors):
    header, data = {}, b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


write(d, "f32.safetensors", safetensors([("a", "F32", [2, 2], struct.pack("<4f", 1, -2, 3.5, 0))]))
write(d, "mixed.safetensors", safetensors([
    ("w.bf16", "BF16", [3], struct.pack("<3H", 0x3F80, 0xC000, 0x0000)),
    ("w.f16", "F16", [2, 1], struct.pack("<2H", 0x3C00, 0xBC00)),
    ("empty", "F32", [0], b""),
]))

# -- gguf: the reader's test files (written by the gguf package), a bare header, two vocabularies
d = target("gguf")
for name in ("metadata", "tensors", "nested_deep"):
    with open(os.path.join(ROOT, "tests", "fixtures", "gguf", name + ".gguf"), "rb") as f:
        write(d, name + ".gguf", f.read())
write(d, "empty.gguf", b"GGUF" + struct.pack("<IQQ", 3, 0, 0))
# Vocabularies written by llama.cpp's converter, one of each tokenizer model ("llama" SentencePiece,
# "gpt2" byte-level with a pre-tokenizer and chat templates): the target runs their tokenizers.
for name in ("llama_spm", "qwen2"):
    with open(os.path.join(ROOT, "tests", "fixtures", "gguf_tokenizers", name + ".gguf"), "rb") as f:
        write(d, "vocabulary_" + name + ".gguf", f.read())

# -- tokenizer_json: the test fixtures cut down to a few hundred tokens --------------------------
d = target("tokenizer_json")
for name in ("llama_spm", "llama3", "gpt2"):
    with open(os.path.join(ROOT, "tests", "fixtures", "tokenizers", name, "tokenizer.json")) as f:
        tok = json.load(f)
    model = tok["model"]
    keep = dict(sorted(model["vocab"].items(), key=lambda kv: kv[1])[:320])
    model["vocab"] = keep
    merges = []
    for m in model.get("merges", []):
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        if a in keep and b in keep and a + b in keep:
            merges.append(m)
    model["merges"] = merges
    tok["added_tokens"] = [t for t in tok.get("added_tokens", []) if t["id"] < 320]
    write(d, name + ".json", json.dumps(tok, ensure_ascii=False))

# -- tokenize: a selector byte (which tokenizer, BOS or not) and text ----------------------------
d = target("tokenize")
texts = ["Once upon a time, there was a little girl named Lily.", "  two  spaces\n\nand\ttabs ",
         "caf\u00e9 \u00fcber na\u00efve \u65e5\u672c\u8a9e \U0001F600", "don't I'll 12345 3.14",
         "<s>not a token</s>", ""]
for i, text in enumerate(texts):
    for selector in (0, 1, 2, 0x81):
        write(d, "text%d-%02x" % (i, selector), bytes([selector]) + text.encode())
write(d, "invalid-utf8", b"\x01\xff\xfe\xc3(\xe2\x82\xf0\x9f\x98")

# -- normalizer: a selector byte (which normalizer), a repeat count and text ---------------------
d = target("normalizer")
texts = ["\ufdfa", "\ufdfb pray", "\u1f82\u1f82\u1f82", "\u0958\ufb2c\U0001d160", "\u3300 \u3301",
         "caf\u00e9 cafe\u0301", "\ud55c\uad6d\uc5b4", "\u00bd \u2460 \ufb01 \u2122", "A\u030a\u0301 \u1e9b\u0323",
         "  spaces\u00a0and\u3000more  ", "plain ASCII text"]
for i, text in enumerate(texts):
    for selector, repeat in ((0, 0), (1, 8), (2, 63), (3, 20), (4, 1), (5, 0), (6, 5)):
        write(d, "text%d-%d" % (i, selector), bytes([selector, repeat]) + text.encode())
write(d, "invalid-utf8", b"\x03\x02\xff\xfe\xc3(\xe2\x82\xf0\x9f\x98")

# -- request_json: completion and chat bodies ----------------------------------------------------
d = target("request_json")
bodies = [
    {"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0},
    {"prompt": ["a", "b"], "max_tokens": 4, "stream": True, "stream_options": {"include_usage": True}},
    {"prompt": "x", "stop": ["\n", "Lily"], "top_p": 0.9, "top_k": 40, "seed": 7, "timeout": 2.5},
    {"model": "stories260K", "messages": [{"role": "system", "content": "Be brief."},
                                         {"role": "user", "content": "Hi"}], "max_completion_tokens": 8},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
     "stream": True},
    {"prompt": "x", "n": 2, "logprobs": 1, "priority": 3, "temperature": None},
    {"prompt": "Lily", "max_tokens": 0, "echo": True, "logprobs": 20, "stream": True},
    {"messages": [{"role": "user", "content": "Hi"}], "logprobs": True, "top_logprobs": 5},
    {"prompt": [[1, 403, 407], [1, 2]], "presence_penalty": 0.5, "frequency_penalty": -1,
     "repetition_penalty": 1.2, "logit_bias": {"432": -100, "7": 2.5}, "max_tokens": 8,
     "min_tokens": 4, "stop_token_ids": [2, 13], "ignore_eos": True, "add_special_tokens": False},
    {"messages": [{"role": "user", "content": "Hi"}], "logit_bias": {"5": 1}, "min_tokens": 1,
     "add_generation_prompt": False, "tool_choice": "none", "user": "u", "unknown_field": 1},
]
for i, body in enumerate(bodies):
    write(d, "body%d.json" % i, json.dumps(body))

# -- http_request: raw requests as clients send them --------------------------------------------
d = target("http_request")


def post(path, body, extra=b""):
    return (b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" + extra +
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


requests = {
    "health": b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n",
    "models-1.0": b"GET /v1/models HTTP/1.0\r\n\r\n",
    "completion": post(b"/v1/completions", b'{"prompt": "Once upon a time", "max_tokens": 4}'),
    "stream-chunked": b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                      b"1f\r\n" + b'{"prompt": "a", "stream": true}' + b"\r\n0\r\n\r\n",
    "chat": post(b"/v1/chat/completions", b'{"messages": [{"role": "user", "content": "Hi"}]}'),
    "tokenize": post(b"/tokenize", b'{"prompt": "Once upon a time", "add_special_tokens": false}'),
    "tokenize-chat": post(b"/tokenize", b'{"messages": [{"role": "user", "content": "Hi"}]}'),
    "detokenize": post(b"/detokenize", b'{"tokens": [1, 403, 407]}'),
    "pipelined": b"GET /health HTTP/1.1\r\n\r\nGET /metrics HTTP/1.1\r\n\r\n" +
                 post(b"/v1/completions", b'{"prompt": "x", "stream": true}'),
    "expect": post(b"/v1/completions", b'{"prompt": "x"}', b"Expect: 100-continue\r\n"),
    "bad": b"BREW /pot HTTP/1.1\r\nX: \xff\r\n\r\n",
}
for name, raw in requests.items():
    write(d, name, raw)

# -- template_lexer, template_parser, template_renderer: chat templates ----------------------------
# The templates of the chat tests (the formats of real models, the embedded model's, one that uses
# every supported construct, those saved with tokenizers), and small ones at the renderer's limits.
templates = {}
for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "chat_templates", "*.jinja"))):
    templates[os.path.basename(path)] = open(path, encoding="utf-8").read()
templates["stories260K.jinja"] = open(os.path.join(ROOT, "models", "stories260K", "chat_template.jinja"),
                                      encoding="utf-8").read()
for path in sorted(glob.glob(os.path.join(ROOT, "tests", "fixtures", "chat_templates", "models", "*",
                                          "**", "*.jinja"), recursive=True)):
    rel = os.path.relpath(path, os.path.join(ROOT, "tests", "fixtures", "chat_templates", "models"))
    templates["saved-" + rel.replace(os.sep, "-")] = open(path, encoding="utf-8").read()
templates.update({
    "range.jinja": "{% for i in range(3, -9, -4) %}{{ i }}{% endfor %}{{ range(5) | length }}",
    "arithmetic.jinja": "{{ 2 ** 62 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 'ab' * 3 }} "
                        "{{ [1] * 2 + [3] }} {{ 1.5 | int }} {{ '12' | int }} {{ -3 | abs }}",
    "strings.jinja": "{{ 'a,b,,c'.split(',') }} {{ ' x y '.split() }} {{ 'aaa' | replace('a', 'bb') }} "
                     "{{ 'héllo'[1:4] }} {{ 'héllo'[::-1] }} {{ 'lo' in 'hello' }} {{ 'x' ~ 1 ~ none }}",
    "namespace.jinja": "{% set ns = namespace(s='', n=0) %}{% for m in messages %}"
                       "{% set ns.s = ns.s ~ m.content %}{% set ns.n = ns.n + 1 %}{% endfor %}"
                       "{{ ns.s | length }} {{ ns.n }} {{ {'a': [1, {'b': none}]} | tojson(indent=2) }}",
    "nesting.jinja": "{{ ((((1 + 2) * 3) - 4) // 5) }}{% if true %}{% for m in messages %}"
                     "{% if m.role == 'user' %}{{ [[m.content]] }}{% endif %}{% endfor %}{% endif %}",
})
for name in ("template_lexer", "template_parser", "template_renderer"):
    d = target(name)
    for file, text in templates.items():
        write(d, file, text)
