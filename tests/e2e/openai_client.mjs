// Runs the official `openai` npm package (tools/node_modules, see tools/package.json) against a
// Conveyor server: one whole and one streamed greedy completion of "Once upon a time".
// Usage: node tests/e2e/openai_client.mjs http://127.0.0.1:PORT/v1
// Prints {"whole": {...}, "stream": {...}} as JSON on stdout; exits 2 when the package is missing.
import { createRequire } from "node:module";

const require = createRequire(new URL("../../tools/package.json", import.meta.url));
let OpenAI;
try {
  const openai = require("openai");
  OpenAI = openai.OpenAI ?? openai.default ?? openai;
} catch (err) {
  console.error(`the openai npm package is missing in tools/node_modules (${err.message}); ` +
                "run scripts/setup.sh --tests");
  process.exit(2);
}

const baseURL = process.argv[2];
if (!baseURL) {
  console.error("usage: node openai_client.mjs http://127.0.0.1:PORT/v1");
  process.exit(1);
}
const client = new OpenAI({ baseURL, apiKey: "unused", maxRetries: 0, timeout: 30000 });
const params = { model: "stories260K", prompt: "Once upon a time", max_tokens: 60, temperature: 0 };

const whole = await client.completions.create(params);

const stream = await client.completions.create({ ...params, stream: true });
let text = "";
let finish_reason = null;
let chunks = 0;
for await (const chunk of stream) {
  chunks += 1;
  if (chunk.choices.length > 0) {
    text += chunk.choices[0].text;
    finish_reason = chunk.choices[0].finish_reason ?? finish_reason;
  }
}

console.log(JSON.stringify({
  whole: {
    text: whole.choices[0].text,
    finish_reason: whole.choices[0].finish_reason,
    model: whole.model,
    usage: whole.usage,
  },
  stream: { text, finish_reason, chunks },
}));
