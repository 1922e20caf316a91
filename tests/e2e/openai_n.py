"""Runs the official `openai` Python package against a Conveyor server asking for several choices
(`n`) and prints what it saw as one JSON object; tests/e2e/n_choices_test.cpp checks it.

Usage: python openai_n.py BASE_URL
  greedy   n=4 at temperature 0, whole and streamed (choices gathered by index)
  seeded   n=3 at temperature 1 with seed 42, whole and streamed, and the same request sent
           alone with n=1 and seed 42, 43, 44 (what choice i must equal)
  chat     a chat completion with n=2 at temperature 0, and the same with n=1
  too_many n=17, above the server's default limit (server.max_n = 16)
"""

import sys

try:
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"the openai Python package is missing ({err}); run scripts/setup.sh --tests",
          file=sys.stderr)
    sys.exit(2)


def streamed_choices(stream, n, chat=False):
    """Texts and finish reasons of a stream's choices, by index, and the usage chunk's usage."""
    texts, reasons, usage = [""] * n, [None] * n, None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage.model_dump()
        for c in chunk.choices:
            texts[c.index] += (c.delta.content or "") if chat else c.text
            reasons[c.index] = c.finish_reason or reasons[c.index]
    return {"texts": texts, "finish_reasons": reasons, "usage": usage}


def whole_choices(response, chat=False):
    return {
        "texts": [c.message.content if chat else c.text for c in response.choices],
        "indexes": [c.index for c in response.choices],
        "finish_reasons": [c.finish_reason for c in response.choices],
        "usage": response.usage.model_dump(),
    }


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 1
    client = openai.OpenAI(base_url=argv[1], api_key="unused", max_retries=0, timeout=120)
    model = client.models.list().data[0].id
    out = {}
    greedy = {"model": model, "prompt": "Once upon a time", "max_tokens": 60, "temperature": 0}
    out["greedy"] = {
        "whole": whole_choices(client.completions.create(**greedy, n=4)),
        "stream": streamed_choices(client.completions.create(
            **greedy, n=4, stream=True, stream_options={"include_usage": True}), 4),
    }
    seeded = {"model": model, "prompt": "Once upon a time", "max_tokens": 30, "temperature": 1}
    out["seeded"] = {
        "whole": whole_choices(client.completions.create(**seeded, n=3, seed=42)),
        "stream": streamed_choices(client.completions.create(**seeded, n=3, seed=42,
                                                             stream=True), 3),
        "alone": [client.completions.create(**seeded, seed=42 + i).choices[0].text
                  for i in range(3)],
    }
    messages = [{"role": "user", "content": "Tell me a story."}]
    chat = {"model": model, "messages": messages, "max_tokens": 30, "temperature": 0}
    out["chat"] = {
        "whole": whole_choices(client.chat.completions.create(**chat, n=2), chat=True),
        "stream": streamed_choices(client.chat.completions.create(**chat, n=2, stream=True), 2,
                                   chat=True),
        "alone": client.chat.completions.create(**chat).choices[0].message.content,
    }
    try:
        client.completions.create(**greedy, n=17)
        out["too_many"] = "accepted"
    except openai.APIStatusError as err:
        body = err.body if isinstance(err.body, dict) else {}
        out["too_many"] = {"class": type(err).__name__, "status": err.status_code,
                           "param": body.get("param"), "message": body.get("message")}
    print(__import__("json").dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
