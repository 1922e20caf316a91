"""Runs the official `openai` Python package against a Conveyor server and prints what it saw.

The package is pinned in tools/requirements-tests.txt and installed into tools/venv by
`scripts/setup.sh --tests`; tests/e2e/clients_test.cpp runs this file with that venv's python.

Usage: python openai_client.py BASE_URL SCENARIO
  BASE_URL  e.g. http://127.0.0.1:PORT/v1
  SCENARIO  completions   one whole and one streamed greedy completion of "Once upon a time"
            bad-requests  requests the server refuses as invalid (400) or unknown (404)
            expire        a request whose deadline passes in the queue (504)
            queue-full    a request refused because the queue is full (429)
Prints one JSON object on stdout; exits 2 when the package is missing, 1 on wrong usage.
Errors are reported as the client's own exception class, status, code, param and message, so
the test checks what an application using the package would see.
"""

import json
import sys

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
    }


def expire(client):
    return {"expired": refusal(lambda: client.completions.create(
        model=served_model(client), prompt="Once upon a time", max_tokens=4,
        extra_body={"timeout": 0.001}))}


def queue_full(client):
    return {"queue_full": refusal(lambda: client.completions.create(
        model=served_model(client), prompt="Once upon a time", max_tokens=4))}


SCENARIOS = {"completions": completions, "bad-requests": bad_requests, "expire": expire,
             "queue-full": queue_full}


def main(argv):
    if len(argv) != 3 or argv[2] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 1
    # No retries: a refusal must reach the test as the first answer, not be retried away.
    client = openai.OpenAI(base_url=argv[1], api_key="unused", max_retries=0, timeout=60)
    print(json.dumps(SCENARIOS[argv[2]](client)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
