"""Runs the official `openai` Python package against a Conveyor server serving stories260K with
the further sampling fields (penalties, logit_bias, min_tokens, stop_token_ids, ignore_eos,
token-id prompts, /tokenize and /detokenize) and prints what it saw; the C++ test
(tests/e2e/sampling_fields_test.cpp) checks it.

Usage: python sampling_client.py BASE_URL SCENARIO
  BASE_URL  e.g. http://127.0.0.1:PORT/v1
  SCENARIO  sampling   every field, each once whole and once streamed
            refusals   values the server refuses (400 with the field as param)
            tokenize   /tokenize of every string of tests/fixtures/tokenizers/corpus.json,
                       with and without special tokens, and /detokenize of the ids
Prints one JSON object on stdout; exits 2 when the package is missing, 1 on wrong usage.
"""

import json
import pathlib
import sys
import urllib.error
import urllib.request

try:
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"the openai Python package is missing ({err}); run scripts/setup.sh --tests",
          file=sys.stderr)
    sys.exit(2)

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMPT = "Once upon a time"


def expected_run():
    """The prompt ids and the greedy story's ids of run.c (models/stories260K/expected)."""
    fields = {}
    path = ROOT / "models" / "stories260K" / "expected" / "greedy_once_upon_a_time_n64.tokens"
    for line in path.read_text().splitlines():
        key, *values = line.split()
        fields[key] = [int(v) for v in values]
    prompt = fields["PROMPT_TOKENS"]
    return prompt, fields["SEQ"][len(prompt):]


def post(base_url, path, body):
    """POSTs JSON to the server's root (not /v1); (status, parsed body)."""
    url = base_url.rsplit("/v1", 1)[0] + path
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def complete(client, stream, **kwargs):
    """One completion, whole or streamed: its text(s), finish reason(s) and usage."""
    if not stream:
        whole = client.completions.create(**kwargs)
        return {"texts": [c.text for c in whole.choices],
                "finish_reasons": [c.finish_reason for c in whole.choices],
                "usage": whole.usage.model_dump()}
    texts, reasons, usage = {}, {}, None
    for chunk in client.completions.create(**kwargs, stream=True,
                                           stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage.model_dump()
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + c.text
            if c.finish_reason:
                reasons[c.index] = c.finish_reason
    return {"texts": [texts[i] for i in sorted(texts)],
            "finish_reasons": [reasons.get(i) for i in sorted(texts)], "usage": usage}


def chat(client, stream, **kwargs):
    if not stream:
        whole = client.chat.completions.create(**kwargs)
        return {"texts": [whole.choices[0].message.content],
                "finish_reasons": [whole.choices[0].finish_reason],
                "usage": whole.usage.model_dump()}
    text, reason, usage = "", None, None
    for chunk in client.chat.completions.create(**kwargs, stream=True,
                                                stream_options={"include_usage": True}):
        if chunk.usage:
            usage = chunk.usage.model_dump()
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            reason = chunk.choices[0].finish_reason or reason
    return {"texts": [text], "finish_reasons": [reason], "usage": usage}


def sampling(client, base_url):
    model = client.models.list().data[0].id
    prompt_ids, story = expected_run()
    greedy = {"model": model, "prompt": PROMPT, "temperature": 0}
    stop_id = story[4]
    # The id of "." (the story's first full stop): it ends the chat answer's first sentence.
    full_stop = next(t for t in story if post(base_url, "/detokenize", {"tokens": [t]})[1]
                     .get("prompt") == ".")
    result = {"prompt_ids": prompt_ids, "story": story, "stop_id": stop_id,
              "full_stop_id": full_stop}
    for stream in (False, True):
        runs = {
            "greedy": complete(client, stream, **greedy, max_tokens=40),
            "bias": complete(client, stream, **greedy, max_tokens=40,
                             logit_bias={str(story[0]): -100}),
            "bias_up": complete(client, stream, **greedy, max_tokens=1,
                                logit_bias={"100": 100}),
            "penalties": complete(client, stream, **greedy, max_tokens=40,
                                  presence_penalty=1.0, frequency_penalty=1.5),
            "repetition": complete(client, stream, **greedy, max_tokens=40,
                                   extra_body={"repetition_penalty": 1.8}),
            "ends_alone": complete(client, stream, **greedy, max_tokens=480),
            "ignore_eos": complete(client, stream, **greedy, max_tokens=480,
                                   extra_body={"ignore_eos": True}),
            "stop_token_ids": complete(client, stream, **greedy, max_tokens=40,
                                       extra_body={"stop_token_ids": [stop_id]}),
            "stop_lily": complete(client, stream, **greedy, max_tokens=64, stop=["Lily"]),
            "min_tokens_lily": complete(client, stream, **greedy, max_tokens=64, stop=["Lily"],
                                        extra_body={"min_tokens": 12}),
            "token_prompt": complete(client, stream, model=model, prompt=prompt_ids,
                                     temperature=0, max_tokens=40),
            "token_prompts": complete(client, stream, model=model,
                                      prompt=[prompt_ids, prompt_ids[:3]], temperature=0,
                                      max_tokens=10),
            "chat_bias_up": chat(client, stream, model=model, temperature=0, max_tokens=1,
                                 messages=[{"role": "user", "content": PROMPT}],
                                 logit_bias={"100": 100}),
            "chat_penalties": chat(client, stream, model=model, temperature=0,
                                   max_completion_tokens=40, presence_penalty=1.0,
                                   frequency_penalty=1.5,
                                   messages=[{"role": "user", "content": PROMPT}]),
            "chat_stop_token_ids": chat(client, stream, model=model, temperature=0,
                                        max_tokens=40, extra_body={"stop_token_ids": [full_stop]},
                                        messages=[{"role": "user", "content": PROMPT}]),
            "chat_plain": chat(client, stream, model=model, temperature=0,
                               max_completion_tokens=40,
                               messages=[{"role": "user", "content": PROMPT}]),
        }
        result["stream" if stream else "whole"] = runs
    _, result["tokenize"] = post(base_url, "/tokenize", {"prompt": PROMPT})
    _, result["tokenize_chat"] = post(base_url, "/tokenize",
                                      {"messages": [{"role": "user", "content": PROMPT}]})
    _, result["detokenize"] = post(base_url, "/detokenize", {"tokens": prompt_ids})
    _, result["detokenize_100"] = post(base_url, "/detokenize", {"tokens": [100]})
    return result


def refusal(call):
    """Runs `call`, which must raise the client's error; returns what the error carries."""
    try:
        call()
    except openai.APIStatusError as err:
        body = err.body if isinstance(err.body, dict) else {}
        return {"class": type(err).__name__, "status": err.status_code,
                "param": body.get("param"), "message": body.get("message")}
    return {"class": None}


def refusals(client, base_url):
    model = client.models.list().data[0].id
    base = {"model": model, "prompt": PROMPT, "max_tokens": 4}
    cases = {
        "presence_penalty": lambda: client.completions.create(**base, presence_penalty=2.5),
        "frequency_penalty": lambda: client.completions.create(**base, frequency_penalty=-3),
        "repetition_penalty": lambda: client.completions.create(
            **base, extra_body={"repetition_penalty": 0}),
        "logit_bias.99999": lambda: client.completions.create(**base, logit_bias={"99999": 1}),
        "logit_bias.5": lambda: client.completions.create(**base, logit_bias={"5": 150}),
        "min_tokens": lambda: client.completions.create(**base, extra_body={"min_tokens": 5}),
        "stop_token_ids[1]": lambda: client.completions.create(
            **base, extra_body={"stop_token_ids": [2, 512]}),
        "ignore_eos": lambda: client.completions.create(**base, extra_body={"ignore_eos": "yes"}),
        "prompt[1][3]": lambda: client.completions.create(
            model=model, prompt=[[1, 2], [3, 4, 5, 9999]], max_tokens=4),
        "prompt[2]": lambda: client.completions.create(model=model, prompt=[1, 2, -1],
                                                       max_tokens=4),
        "prompt[1]": lambda: client.completions.create(model=model, prompt=[[1], []],
                                                       max_tokens=4),
        "best_of": lambda: client.completions.create(**base, best_of=2),
        "suffix": lambda: client.completions.create(**base, suffix="The end."),
        "n": lambda: client.completions.create(**base, n=17),
        "min_p": lambda: client.completions.create(**base, extra_body={"min_p": 0.05}),
        "tools": lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}],
            tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]),
        "response_format": lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}],
            response_format={"type": "json_schema", "json_schema": {
                "name": "bad", "schema": {"type": "object", "properties": {"a": {"$ref": "#/x"}}}}}),
        "chat.logit_bias.600": lambda: client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi"}], logit_bias={"600": 1}),
    }
    result = {name: refusal(call) for name, call in cases.items()}
    # Harmless metadata and unknown fields are accepted.
    accepted = client.completions.create(**base, user="someone",
                                         extra_body={"some_unknown_field": 1})
    result["accepted"] = accepted.choices[0].finish_reason
    result["tokenize_bad"] = post(base_url, "/tokenize", {"prompt": 5})
    result["detokenize_bad"] = post(base_url, "/detokenize", {"tokens": [1, 512]})
    return result


def tokenize(client, base_url):
    del client
    corpus = json.loads((ROOT / "tests" / "fixtures" / "tokenizers" / "corpus.json")
                        .read_text(encoding="utf-8"))["strings"]
    plain, special, decoded = [], [], []
    for text in corpus:
        _, a = post(base_url, "/tokenize", {"prompt": text, "add_special_tokens": False})
        _, b = post(base_url, "/tokenize", {"prompt": text})
        _, d = post(base_url, "/detokenize", {"tokens": a["tokens"]})
        plain.append(a["tokens"])
        special.append(b["tokens"])
        decoded.append(d["prompt"])
    return {"ids": plain, "ids_special": special, "decoded": decoded, "strings": corpus}


SCENARIOS = {"sampling": sampling, "refusals": refusals, "tokenize": tokenize}


def main(argv):
    if len(argv) != 3 or argv[2] not in SCENARIOS:
        print(__doc__, file=sys.stderr)
        return 1
    client = openai.OpenAI(base_url=argv[1], api_key="unused", max_retries=0, timeout=60)
    print(json.dumps(SCENARIOS[argv[2]](client, argv[1])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
