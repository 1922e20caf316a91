"""Runs the official `openai` Python package against a Conveyor server serving stories260K with
tools (tests/e2e/tools_chat.jinja, model.tool_call_parser = "hermes") and prints what it saw;
tests/e2e/tool_calls_test.cpp checks it. Every call's arguments are validated here against its
function's parameters with the `jsonschema` package, at temperature 1 over many seeds, so that
only the constraint can make them valid.

Usage: python tools_client.py BASE_URL
Prints one JSON object on stdout; exits 2 when a package is missing.
"""

import json
import sys

try:
    import jsonschema
    import openai
except ImportError as err:  # pragma: no cover - the test reports this output
    print(f"a Python package is missing ({err}); run scripts/setup.sh --tests", file=sys.stderr)
    sys.exit(2)

SEEDS = range(12)
WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "unit": {"enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city", "unit"],
    "additionalProperties": False,
}
TIME = {
    "type": "object",
    "properties": {"zone": {"enum": ["UTC", "CET"]}, "hours": {"type": "integer",
                                                            "minimum": 0, "maximum": 23}},
    "required": ["zone", "hours"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "The weather.",
                                      "parameters": WEATHER}},
    {"type": "function", "function": {"name": "get_time", "parameters": TIME}},
]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
MESSAGES = [{"role": "user", "content": "What is the weather like?"}]
# Forces stories260K into a Hermes call, so that tool_choice "auto" has one to read.
HERMES_CALL = ('<tool_call>\n\\{"name": "get_weather", "arguments": '
               '\\{"city": "[a-z]{1,8}", "unit": "celsius"\\}\\}\n</tool_call>')


def verdicts(message, calls=None):
    """'valid' or why not, for each call of an answer's message (or of `calls`)."""
    out = []
    for call in (message.tool_calls or []) if calls is None else calls:
        if call.type != "function" or not call.id.startswith("call_"):
            out.append(f"bad call {call.type} {call.id}")
            continue
        schema = SCHEMAS.get(call.function.name)
        if schema is None:
            out.append(f"unknown function {call.function.name}")
            continue
        try:
            jsonschema.validate(json.loads(call.function.arguments), schema)
            out.append("valid")
        except (json.JSONDecodeError, jsonschema.ValidationError) as err:
            out.append(f"{call.function.arguments}: {err}")
    return out


def tally(responses):
    """Finish reasons; the calls of the answers that finished with tool_calls and whether each
    fits its function; what an answer that did not looks like."""
    result = {"tool_calls": 0, "length": 0, "calls": 0, "invalid": [], "not_calls": [],
              "distinct": len({json.dumps([(c.function.name, c.function.arguments)
                                           for c in r.choices[0].message.tool_calls or []])
                               for r in responses}),
              "max_calls": 0}
    for r in responses:
        choice = r.choices[0]
        result[choice.finish_reason] = result.get(choice.finish_reason, 0) + 1
        if choice.finish_reason == "tool_calls":
            if choice.message.content is not None and choice.message.content != "":
                result["not_calls"].append(["content", choice.message.content])
            v = verdicts(choice.message)
            result["calls"] += len(v)
            result["max_calls"] = max(result["max_calls"], len(v))
            result["invalid"] += [x for x in v if x != "valid"]
            if not v:
                result["not_calls"].append(["no calls", choice.message.content])
        elif choice.finish_reason == "length":
            # A forced answer cut at max_tokens keeps its calls, the last one's arguments cut
            # where the limit fell: the calls before it are whole and fit.
            if choice.message.content:
                result["not_calls"].append(["cut with content", choice.message.content])
            calls = choice.message.tool_calls or []
            v = verdicts(choice.message, calls[:-1])
            result["cut_calls"] = result.get("cut_calls", 0) + len(v)
            result["invalid"] += [x for x in v if x != "valid"]
        else:
            result["not_calls"].append([choice.finish_reason, choice.message.content])
    return result


def streamed(stream):
    """The message a stream's deltas add up to, as the openai package's users assemble it."""
    content, calls, reason, ids_once = "", [], None, True
    for chunk in stream:
        for choice in chunk.choices:
            reason = choice.finish_reason or reason
            delta = choice.delta
            content += delta.content or ""
            for d in delta.tool_calls or []:
                if d.index == len(calls):
                    calls.append({"id": d.id, "name": d.function.name,
                                  "arguments": d.function.arguments or ""})
                    ids_once = ids_once and d.id is not None and d.type == "function"
                else:
                    ids_once = ids_once and d.id is None
                    calls[d.index]["arguments"] += d.function.arguments or ""
    return content, calls, reason, ids_once


def whole(message):
    return (message.content or "",
            [{"name": c.function.name, "arguments": c.function.arguments}
             for c in message.tool_calls or []])


def main():
    base_url = sys.argv[1]
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    out = {}

    def ask(**kwargs):
        return client.chat.completions.create(model=model, messages=MESSAGES, tools=TOOLS,
                                              temperature=1, **kwargs)

    named = {"type": "function", "function": {"name": "get_time"}}
    out["required"] = tally([ask(seed=s, max_tokens=300, tool_choice="required")
                             for s in SEEDS])
    out["single"] = tally([ask(seed=s, max_tokens=200, tool_choice="required",
                               parallel_tool_calls=False) for s in SEEDS])
    out["named"] = tally([ask(seed=s, max_tokens=100, tool_choice=named) for s in SEEDS])
    out["named_functions"] = sorted({c.function.name for r in [ask(seed=1, max_tokens=100,
                                                                   tool_choice=named)]
                                     for c in r.choices[0].message.tool_calls or []})
    auto = [ask(seed=s, max_tokens=100, extra_body={"structured_outputs": {"regex": HERMES_CALL}})
            for s in SEEDS]
    out["auto"] = tally(auto)
    out["auto_content"] = sorted({str(r.choices[0].message.content) for r in auto})

    # Streamed answers add up to the whole answer of the same seed, exactly.
    agree = []
    for seed in range(4):
        for kwargs in (dict(max_tokens=200, tool_choice="required", parallel_tool_calls=False),
                       dict(max_tokens=100, tool_choice=named),
                       dict(max_tokens=100, extra_body={"structured_outputs":
                                                        {"regex": HERMES_CALL}}),
                       dict(max_tokens=20, tool_choice="none")):
            r = ask(seed=seed, **kwargs)
            content, calls, reason, ids_once = streamed(ask(seed=seed, stream=True, **kwargs))
            w_content, w_calls = whole(r.choices[0].message)
            agree.append([content == w_content,
                          [{"name": c["name"], "arguments": c["arguments"]} for c in calls]
                          == w_calls,
                          reason == r.choices[0].finish_reason, ids_once])
    out["stream_agrees"] = agree

    # The conversation goes on: the answer's calls and their results go back to the model.
    r = ask(seed=3, max_tokens=100, tool_choice=named)
    calls = r.choices[0].message.tool_calls or []
    history = MESSAGES + [r.choices[0].message.model_dump(exclude_none=True)] + [
        {"role": "tool", "tool_call_id": c.id, "content": '{"time": "12:00"}'} for c in calls]
    follow = client.chat.completions.create(model=model, messages=history, tools=TOOLS,
                                            tool_choice="none", temperature=0, max_tokens=5)
    out["follow_up"] = {"calls": len(calls), "finish_reason": follow.choices[0].finish_reason,
                        "prompt_tokens": follow.usage.prompt_tokens,
                        "content_is_text": isinstance(follow.choices[0].message.content, str)}

    def refusal(**kwargs):
        try:
            client.chat.completions.create(model=model, max_tokens=5,
                                           **{"messages": MESSAGES, **kwargs})
        except openai.BadRequestError as err:
            body = err.body if isinstance(err.body, dict) else {}
            return {"status": err.status_code, "param": body.get("param")}
        return {"status": 200}
    out["unknown_function"] = refusal(tools=TOOLS, tool_choice={
        "type": "function", "function": {"name": "nope"}})
    out["no_tools"] = refusal(tool_choice="required")
    out["bad_name"] = refusal(tools=[{"type": "function", "function": {"name": "a b"}}])
    out["bad_arguments"] = refusal(messages=MESSAGES + [{"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_time", "arguments": "{not json"}}]}])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
