"""Runs the official `openai` Python package against a Conveyor server and prints what it saw.

The package is pinned in tools/requirements-tests.txt and installed into tools/venv by
`scripts/setup.sh --tests`; tests/e2e/clients_test.cpp runs this file with that venv's python.

Usage: python openai_client.py BASE_URL SCENARIO
  BASE_URL  e.g. http://127.0.0.1:PORT/v1
  SCENARIO  completions   one whole and one streamed greedy completion of "Once upon a time"
            bad-requests  requests the server refuses as invalid (400) or unknown (404: an
                          endpoint, or a model that is not served)
            busy          on a server with one slot and a queue of one: a request whose
                          deadline passes in the queue (504), one refused because the queue
                          is full (429)
            cached        a conversation of two turns with a long system prompt (the second
                          whole, then streamed with usage) and a completion prompt sent
                          twice: each answer's usage as the client's typed fields read it
            chat          one whole and one streamed greedy chat completion of the
                          "system_user" conversation of tests/fixtures/chat_templates/
                          expected.json, and the greedy completion of jinja2's rendering of
                          it with the default template (the reference the chat text must equal)
Prints one JSON object on stdout; exits 2 when the package is missing, 1 on wrong usage.
Errors are reported as the client's own exception class, status, code, param and message, so
the test checks what an application using the package would see.
"""

import json
import pathlib
import sys
import threading
import time
import urllib.request

try:
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"the openai Python package is missing ({err}); run scripts/setup.sh --tests",
          file=sys.stderr)
    sys.exit(2)



def served_model(client):
    """The id of the model the server serves, asked the way an application would."""
    return client.models.list().data[0].id


def completions(client):
    greedy = {"model": served_model(client), "prompt": "Once upon a time", "max_tokens": 60,
              "temperature": 0}
    whole = client.completions.create(**greedy)
    text, finish_reason, chunks = "", None, 0
    for chunk in client.completions.create(**greedy, stream=True):
        chunks += 1
        if chunk.choices:
            text += chunk.choices[0].text
            finish_reason = chunk.choices[0].finish_reason or finish_reason
    return {
        "version": openai.__version__,
        "whole": {
            "text": whole.choices[0].text,
            "finish_reason": whole.choices[0].finish_reason,
            "model": whole.model,
            "object": whole.object,
            "usage": whole.usage.model_dump(),
        },
        "stream": {"text": text, "finish_reason": finish_reason, "chunks": chunks},
    }


FIXTURE = (pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "chat_templates" /
           "expected.json")


def chat(client):
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    messages = fixture["conversations"]["system_user"]
    rendered = next(r["output"] for r in fixture["renderings"]
                    if r["template"] == "stories260K" and r["conversation"] == "system_user"
                    and r["add_generation_prompt"])
    model = served_model(client)
    # Chat adds no special tokens to the rendered prompt (the template writes none).
    reference = client.completions.create(model=model, prompt=rendered, max_tokens=40,
                                          temperature=0, extra_body={"add_special_tokens": False})
    whole = client.chat.completions.create(model=model, messages=messages, max_tokens=40,
                                           temperature=0)
    text, finish_reason, roles, chunks = "", None, [], 0
    for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=40,
                                                temperature=0, stream=True):
        chunks += 1
        assert chunk.object == "chat.completion.chunk", chunk.object
        if chunk.choices:
            delta = chunk.choices[0].delta
            if delta.role:
                roles.append(delta.role)
            text += delta.content or ""
            finish_reason = chunk.choices[0].finish_reason or finish_reason
    return {
        "reference": {"text": reference.choices[0].text,
                      "usage": reference.usage.model_dump()},
        "whole": {
            "content": whole.choices[0].message.content,
            "role": whole.choices[0].message.role,
            "finish_reason": whole.choices[0].finish_reason,
            "object": whole.object,
            "id": whole.id,
            "usage": whole.usage.model_dump(),
        },
        "stream": {"text": text, "finish_reason": finish_reason, "roles": roles,
                   "chunks": chunks},
        "bad_role": refusal(lambda: client.chat.completions.create(
            model=model, messages=[{"role": "function", "content": "x", "name": "f"}])),
    }


def refusal(call):
    """Runs `call`, which must raise the client's error; returns what the error carries."""
    try:
        call()
    except openai.APIStatusError as err:
        body = err.body if isinstance(err.body, dict) else {}
        return {"class": type(err).__name__, "status": err.status_code,
                "code": body.get("code"), "param": body.get("param"),
                "type": body.get("type"), "message": body.get("message")}
    return {"class": None}


def bad_requests(client):
    model = served_model(client)
    return {
        "temperature": refusal(lambda: client.completions.create(
            model=model, prompt="Hi", max_tokens=4, temperature=5.5)),
        "max_tokens_type": refusal(lambda: client.completions.create(
            model=model, prompt="Hi", max_tokens="ten")),
        "prompt_too_long": refusal(lambda: client.completions.create(
            model=model, prompt="Once upon a time", max_tokens=600)),
        "unknown_endpoint": refusal(lambda: client.models.retrieve("no-such-model")),
        "unknown_model": refusal(lambda: client.completions.create(
            model="gpt-4", prompt="Hi", max_tokens=4)),
        "unknown_chat_model": refusal(lambda: client.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)),
    }


def metrics(url):
    with urllib.request.urlopen(url, timeout=10) as reply:
        return reply.read().decode()


def busy(client, base_url):
    """On a server with one slot and a queue of one: a request whose deadline passes in the
    queue (504), then one that finds the queue full (429). The requests that occupy the slot and
    the queue are sent from here too, so that the refusals follow them within milliseconds."""
    model = served_model(client)
    holder = client.completions.create(model=model, prompt="Once upon a time", max_tokens=480,
                                       temperature=0, stream=True)
    holder_chunks = iter(holder)
    next(holder_chunks)  # the first token came: the request holds the only slot
    expired = refusal(lambda: client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=4, extra_body={"timeout": 0.001}))
    waiting = threading.Thread(target=lambda: client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=4))
    waiting.start()
    metrics_url = base_url.rsplit("/v1", 1)[0] + "/metrics"
    give_up = time.monotonic() + 60
    while "\nconveyor_queue_depth 1\n" not in metrics(metrics_url):
        if time.monotonic() > give_up:
            raise RuntimeError("the request sent to wait in the queue never got there")
        time.sleep(0.01)
    queue_full = refusal(lambda: client.completions.create(
        model=model, prompt="Once upon a time", max_tokens=4))
    holder.close()  # the server cancels it; the waiting request takes the slot and finishes
    waiting.join()
    return {"expired": expired, "queue_full": queue_full}


def usage_of(usage):
    """The usage as the client's typed fields hold it, cached tokens included."""
    return {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.prompt_tokens_details.cached_tokens}


def cached(client):
    """What the prefix cache saves, as the client reports it: a second turn re-reads the first,
    and a completion prompt sent again finds its own blocks."""
    model = served_model(client)
    system = ("You tell short stories to children. Every story has a little dog, a red ball and "
              "a big tree, and it ends with everyone happy in the garden at night.")
    first = [{"role": "system", "content": system},
             {"role": "user", "content": "Tell me a story."}]
    greedy = {"model": model, "max_tokens": 24, "temperature": 0}
    turn1 = client.chat.completions.create(messages=first, **greedy)
    second = first + [{"role": "assistant", "content": turn1.choices[0].message.content},
                      {"role": "user", "content": "And then?"}]
    turn2 = client.chat.completions.create(messages=second, **greedy)
    text, usage = "", None
    for chunk in client.chat.completions.create(messages=second, stream=True,
                                                stream_options={"include_usage": True}, **greedy):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage
    prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside"
    again = [client.completions.create(model=model, prompt=prompt, max_tokens=8, temperature=0)
             for _ in range(2)]
    return {
        "turn1": usage_of(turn1.usage),
        "turn2": {"usage": usage_of(turn2.usage), "text": turn2.choices[0].message.content},
        "turn2_streamed": {"usage": usage_of(usage), "text": text},
        "completion": [{"usage": usage_of(a.usage), "text": a.choices[0].text} for a in again],
    }


SCENARIOS = {"completions": completions, "bad-requests": bad_requests, "busy": busy,
             "chat": chat, "cached": cached}


def main(argv):
    if len(argv) != 3 or argv[2] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 1
    # No retries: a refusal must reach the test as the first answer, not be retried away.
    client = openai.OpenAI(base_url=argv[1], api_key="unused", max_retries=0, timeout=60)
    scenario = SCENARIOS[argv[2]]
    args = (client, argv[1]) if scenario is busy else (client,)
    print(json.dumps(scenario(*args)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
