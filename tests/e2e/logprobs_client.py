"""Asks a Conveyor server for log-probabilities and echo with the official `openai` package.

tests/e2e/logprobs_test.cpp runs this file with the python of tools/venv (the package pinned in
tools/requirements-tests.txt) and compares what it prints with the float64 reference of
tests/fixtures/logprobs/stories260K.json.

Usage: python logprobs_client.py BASE_URL
Prints one JSON object on stdout: the `logprobs` objects the client parsed (model_dump), whole
and streamed (one entry per chunk), for completions (with and without echo, max_tokens 0) and
chat, and the refusals of invalid values. Exits 2 when the package is missing.
"""

import json
import pathlib
import sys

try:
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"the openai Python package is missing ({err}); run scripts/setup.sh --tests",
          file=sys.stderr)
    sys.exit(2)

FIXTURE = (pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" /
           "expected.json")


def dump(x):
    return None if x is None else x.model_dump()


def refusal(call):
    """Runs `call`, which must raise the client's error; returns what the error carries."""
    try:
        call()
    except openai.APIStatusError as err:
        body = err.body if isinstance(err.body, dict) else {}
        return {"status": err.status_code, "param": body.get("param"),
                "message": body.get("message")}
    return {"status": None}


def completion(client, model, stream, **fields):
    if not stream:
        r = client.completions.create(model=model, stream=False, **fields)
        c = r.choices[0]
        return {"text": c.text, "finish_reason": c.finish_reason, "logprobs": dump(c.logprobs),
                "usage": dump(r.usage)}
    text, finish_reason, chunks = "", None, []
    for chunk in client.completions.create(model=model, stream=True, **fields):
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        text += c.text
        finish_reason = c.finish_reason or finish_reason
        chunks.append({"text": c.text, "logprobs": dump(c.logprobs)})
    return {"text": text, "finish_reason": finish_reason, "chunks": chunks}


def chat(client, model, stream, **fields):
    if not stream:
        r = client.chat.completions.create(model=model, stream=False, **fields)
        c = r.choices[0]
        return {"text": c.message.content, "finish_reason": c.finish_reason,
                "logprobs": dump(c.logprobs)}
    text, finish_reason, chunks = "", None, []
    for chunk in client.chat.completions.create(model=model, stream=True, **fields):
        if not chunk.choices:
            continue
        c = chunk.choices[0]
        text += c.delta.content or ""
        finish_reason = c.finish_reason or finish_reason
        chunks.append({"text": c.delta.content, "logprobs": dump(c.logprobs)})
    return {"text": text, "finish_reason": finish_reason, "chunks": chunks}


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    client = openai.OpenAI(base_url=argv[1], api_key="unused", max_retries=0, timeout=60)
    model = client.models.list().data[0].id
    greedy = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "logprobs": 5}
    echo0 = {"prompt": "Lily and Tom went to the park", "max_tokens": 0, "temperature": 0,
             "echo": True, "logprobs": 3}
    echo2 = {"prompt": "The cat saw a big dog.", "max_tokens": 2, "temperature": 0,
             "echo": True, "logprobs": 1}
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    messages = fixture["conversations"]["system_user"]
    rendered = next(r["output"] for r in fixture["renderings"]
                    if r["template"] == "stories260K" and r["conversation"] == "system_user"
                    and r["add_generation_prompt"])
    chat_fields = {"messages": messages, "max_tokens": 10, "temperature": 0, "logprobs": True,
                   "top_logprobs": 4}
    out = {
        "greedy": completion(client, model, False, **greedy),
        "greedy_stream": completion(client, model, True, **greedy),
        "echo0": completion(client, model, False, **echo0),
        "echo0_stream": completion(client, model, True, **echo0),
        "echo2": completion(client, model, False, **echo2),
        "echo2_stream": completion(client, model, True, **echo2),
        # The chat's prompt as a completion: the same tokens (chat adds no special tokens), so
        # the same log-probabilities.
        "chat_reference": completion(client, model, False, prompt=rendered, max_tokens=10,
                                     temperature=0, logprobs=4,
                                     extra_body={"add_special_tokens": False}),
        "chat": chat(client, model, False, **chat_fields),
        "chat_stream": chat(client, model, True, **chat_fields),
        "refused": {
            "logprobs_21": refusal(lambda: client.completions.create(
                model=model, prompt="Hi", max_tokens=2, logprobs=21)),
            "logprobs_negative": refusal(lambda: client.completions.create(
                model=model, prompt="Hi", max_tokens=2, logprobs=-1)),
            "max_tokens_0_without_echo": refusal(lambda: client.completions.create(
                model=model, prompt="Hi", max_tokens=0, logprobs=1)),
            "top_logprobs_without_logprobs": refusal(lambda: client.chat.completions.create(
                model=model, messages=messages, max_tokens=2, top_logprobs=2)),
            "top_logprobs_21": refusal(lambda: client.chat.completions.create(
                model=model, messages=messages, max_tokens=2, logprobs=True, top_logprobs=21)),
        },
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
