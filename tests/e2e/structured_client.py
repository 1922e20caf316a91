"""Runs the official `openai` Python package against a Conveyor server serving stories260K with
structured outputs and prints what it saw; tests/e2e/structured_outputs_test.cpp checks it.
Every constrained output is validated here by something outside the server: the `jsonschema`
package for JSON schemas, `re.fullmatch` for regexes, the list for choices. Sampling is at
temperature 1 over many seeds, so that only the constraint can make the outputs valid.

Usage: python structured_client.py BASE_URL
Prints one JSON object on stdout; exits 2 when a package is missing.
"""

import json
import re
import sys

try:
    import jsonschema
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"a Python package is missing ({err}); run scripts/setup.sh --tests", file=sys.stderr)
    sys.exit(2)

SEEDS = range(12)
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 12},
        "age": {"type": "integer", "minimum": 1, "maximum": 99},
        "mood": {"enum": ["happy", "sad", "sleepy"]},
        "friends": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3},
    },
    "required": ["name", "age", "mood", "friends"],
    "additionalProperties": False,
}
REGEX = r"(Tom|Lily|Sue) (is|was) [0-9]{1,2} years old\."
CHOICES = ["happy", "sad", "a little \"scared\""]
MESSAGES = [{"role": "user", "content": "Tell me about a child."}]


def check_json(text, schema):
    """'valid', or why not."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        return f"not JSON: {err}"
    try:
        jsonschema.validate(doc, schema)
    except jsonschema.ValidationError as err:
        return f"does not fit: {err.message}"
    return "valid"


def tally(outcomes):
    """Counts of finish reasons, and the invalid outputs of those that stopped."""
    result = {"stop": 0, "length": 0, "invalid": [], "distinct": len({o[0] for o in outcomes})}
    for text, reason, verdict in outcomes:
        result[reason] = result.get(reason, 0) + 1
        if reason == "stop" and verdict != "valid":
            result["invalid"].append([text, verdict])
    return result


def streamed_text(stream):
    text, reason = "", None
    for chunk in stream:
        for choice in chunk.choices:
            piece = choice.delta.content if hasattr(choice, "delta") else choice.text
            text += piece or ""
            reason = choice.finish_reason or reason
    return text, reason


def main():
    base_url = sys.argv[1]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    out = {}

    # JSON schema through response_format, on both endpoints.
    schema_format = {"type": "json_schema",
                     "json_schema": {"name": "child", "schema": SCHEMA, "strict": True}}
    runs = []
    for seed in SEEDS:
        r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=1,
                                           seed=seed, max_tokens=200,
                                           response_format=schema_format)
        text = r.choices[0].message.content
        runs.append((text, r.choices[0].finish_reason, check_json(text, SCHEMA)))
    out["chat_json_schema"] = tally(runs)
    runs = []
    for seed in SEEDS:
        r = client.completions.create(model=model, prompt="Once upon a time", temperature=1,
                                      seed=seed, max_tokens=200,
                                      extra_body={"response_format": schema_format})
        text = r.choices[0].text
        runs.append((text, r.choices[0].finish_reason, check_json(text, SCHEMA)))
    out["completion_json_schema"] = tally(runs)
    # The keys come in the schema's order.
    first = next((t for t, reason, v in runs if reason == "stop" and v == "valid"), None)
    out["key_order"] = list(json.loads(first).keys()) if first else None

    # json_object: any JSON object.
    runs = []
    for seed in SEEDS:
        r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=1,
                                           seed=seed, max_tokens=120,
                                           response_format={"type": "json_object"})
        text = r.choices[0].message.content
        runs.append((text, r.choices[0].finish_reason, check_json(text, {"type": "object"})))
    out["json_object"] = tally(runs)
    # The embedded story model tends to write one long string: what it wrote before max_tokens
    # is still an object's beginning.
    out["json_object"]["all_objects"] = all(t.startswith("{") for t, _, _ in runs)

    # vLLM's structured_outputs: regex, choice, grammar.
    def completions(fmt, max_tokens, check):
        runs = []
        for seed in SEEDS:
            r = client.completions.create(model=model, prompt="Once upon a time", temperature=1,
                                          seed=seed, max_tokens=max_tokens,
                                          extra_body={"structured_outputs": fmt})
            text = r.choices[0].text
            runs.append((text, r.choices[0].finish_reason, "valid" if check(text) else "invalid"))
        return tally(runs)
    out["regex"] = completions({"regex": REGEX}, 60, lambda t: re.fullmatch(REGEX, t))
    grammar = 'root ::= "The " animal " is " color "."\nanimal ::= "cat" | "dog"\n' \
              'color ::= "red" | "blue" | "green"'
    grammar_re = r"The (cat|dog) is (red|blue|green)\."
    out["grammar"] = completions({"grammar": grammar}, 30, lambda t: re.fullmatch(grammar_re, t))
    runs = []
    for seed in SEEDS:
        r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=1,
                                           seed=seed, max_tokens=20,
                                           extra_body={"structured_outputs": {"choice": CHOICES}})
        text = r.choices[0].message.content
        runs.append((text, r.choices[0].finish_reason,
                     "valid" if text in CHOICES else "not a choice"))
    out["choice"] = tally(runs)

    # Streamed and whole agree exactly; n choices each fit.
    agree = []
    for seed in range(4):
        kwargs = dict(model=model, messages=MESSAGES, temperature=1, seed=seed, max_tokens=200,
                      response_format=schema_format)
        whole = client.chat.completions.create(**kwargs)
        text, reason = streamed_text(client.chat.completions.create(stream=True, **kwargs))
        agree.append([whole.choices[0].message.content == text,
                      whole.choices[0].finish_reason == reason])
        kwargs = dict(model=model, prompt="Once upon a time", temperature=1, seed=seed,
                      max_tokens=60, extra_body={"structured_outputs": {"regex": REGEX}})
        whole = client.completions.create(**kwargs)
        text, reason = streamed_text(client.completions.create(stream=True, **kwargs))
        agree.append([whole.choices[0].text == text, whole.choices[0].finish_reason == reason])
    out["stream_agrees"] = agree
    r = client.chat.completions.create(model=model, messages=MESSAGES, temperature=1, seed=5,
                                       n=4, max_tokens=200, response_format=schema_format)
    out["n"] = tally([(c.message.content, c.finish_reason, check_json(c.message.content, SCHEMA))
                      for c in r.choices])

    # Formats the engine cannot compile: 400 naming the field.
    def refusal(**kwargs):
        try:
            client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=5, **kwargs)
        except openai.BadRequestError as err:
            body = err.body if isinstance(err.body, dict) else {}
            return {"status": err.status_code, "param": body.get("param"),
                    "message": body.get("message")}
        return {"status": 200}
    out["bad_schema"] = refusal(response_format={"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "properties": {"a": {"$ref": "#/nowhere"}}}}})
    out["bad_regex"] = refusal(extra_body={"structured_outputs": {"regex": "(unclosed"}})
    out["bad_grammar"] = refusal(extra_body={"structured_outputs": {"grammar": "root ::= ("}})
    out["two_formats"] = refusal(response_format={"type": "json_object"},
                                 extra_body={"structured_outputs": {"regex": "a"}})
    print(json.dumps(out))


if __name__ == "__main__":
    main()
