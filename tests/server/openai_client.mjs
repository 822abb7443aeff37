// The server under a real client (issue 14): the npm `openai` package against
// `dsv4-stage --serve` on the tiny model. Every check throws on failure (exit 1).
//   node openai_client.mjs BASE_URL MODEL EXPECTED_GREEDY.json
// EXPECTED_GREEDY.json: {"prompt": text, "max_tokens": n, "text": the CLI's greedy text}.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";
import path from "node:path";

const require = createRequire(path.join(process.cwd(), "package.json"));
const OpenAI = require("openai");
const [base, model, expectedFile] = process.argv.slice(2);
const expected = JSON.parse(readFileSync(expectedFile, "utf8"));
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: "none", timeout: 60000, maxRetries: 0 });

let failures = 0;
const check = (ok, what, detail = "") => {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    console.log(`FAIL ${what} ${detail}`);
    ++failures;
  }
};
const metric = async (name) => {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " "));
  return line === undefined ? NaN : Number(line.slice(name.length + 1));
};
const greedy = { model, prompt: expected.prompt, max_tokens: expected.max_tokens, temperature: 0, ignore_eos: true };

// Models and health.
const models = await client.models.list();
check(models.data.length === 1 && models.data[0].id === model, "/v1/models lists the model", JSON.stringify(models.data));
check((await fetch(`${base}/health`)).status === 200, "/health is 200 when ready");

// Greedy completion equals the command line's tokens (decoded).
const c = await client.completions.create(greedy);
check(c.choices[0].text === expected.text, "greedy completion equals the CLI's greedy text",
      JSON.stringify([c.choices[0].text, expected.text]));
check(c.usage.completion_tokens === expected.max_tokens && c.choices[0].finish_reason === "length",
      "usage and finish_reason of a max_tokens run", JSON.stringify(c.usage));

// Streaming gives the same text, then the usage chunk, then [DONE] (the iterator ends).
let streamed = "", usage = null, finish = null;
for await (const chunk of await client.completions.create({ ...greedy, stream: true, stream_options: { include_usage: true } })) {
  if (chunk.usage) usage = chunk.usage;
  for (const ch of chunk.choices) {
    streamed += ch.text;
    if (ch.finish_reason) finish = ch.finish_reason;
  }
}
check(streamed === expected.text, "streamed completion equals the non-streamed one", JSON.stringify([streamed, expected.text]));
check(usage && usage.completion_tokens === expected.max_tokens && finish === "length",
      "stream_options.include_usage sends the usage chunk", JSON.stringify(usage));

// Chat, plain and streamed.
const chatReq = { model, messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello!" }], max_tokens: 6, temperature: 0 };
const chat = await client.chat.completions.create(chatReq);
check(chat.choices[0].message.role === "assistant" && typeof chat.choices[0].message.content === "string" &&
      ["stop", "length"].includes(chat.choices[0].finish_reason), "chat completion", JSON.stringify(chat.choices[0]));
let chatStreamed = "";
for await (const chunk of await client.chat.completions.create({ ...chatReq, stream: true }))
  for (const ch of chunk.choices) chatStreamed += ch.delta.content ?? "";
check(chatStreamed === chat.choices[0].message.content, "streamed chat equals the chat completion",
      JSON.stringify([chatStreamed, chat.choices[0].message.content]));

// A stop string: the text ends right before its first occurrence.
const chars = Array.from(expected.text);
let stop = null;
for (let i = 2; i + 2 <= chars.length && !stop; ++i) {
  const s = chars.slice(i, i + 2).join("");
  const at = expected.text.indexOf(s);
  if (at > 0 && !s.includes("\uFFFD")) stop = s;
}
check(stop !== null, "the greedy text has a stop-string candidate", JSON.stringify(expected.text));
if (stop) {
  const s = await client.completions.create({ ...greedy, stop: [stop] });
  check(s.choices[0].text === expected.text.slice(0, expected.text.indexOf(stop)) && s.choices[0].finish_reason === "stop",
        `stop string ${JSON.stringify(stop)} ends the text before it`, JSON.stringify(s.choices[0]));
}

// Sampling with a seed: the same text twice (and streamed); another seed draws its own.
const sampled = { model, prompt: expected.prompt, max_tokens: 12, temperature: 0.9, top_k: 50, top_p: 0.95, seed: 7, ignore_eos: true };
const s1 = await client.completions.create(sampled), s2 = await client.completions.create(sampled);
check(s1.choices[0].text === s2.choices[0].text, "the same seed gives the same text", JSON.stringify([s1.choices[0].text, s2.choices[0].text]));
let s3 = "";
for await (const chunk of await client.completions.create({ ...sampled, stream: true })) for (const ch of chunk.choices) s3 += ch.text;
check(s3 === s1.choices[0].text, "the same seed streamed gives the same text");
const others = await Promise.all([8, 9, 10].map((seed) => client.completions.create({ ...sampled, seed })));
check(others.some((o) => o.choices[0].text !== s1.choices[0].text), "other seeds give other text");

// Concurrent requests queue and all complete.
const lengths = [3, 5, expected.max_tokens, 9, 4];
const all = await Promise.all(lengths.map((n) => client.completions.create({ ...greedy, max_tokens: n })));
check(all.every((r, i) => r.usage.completion_tokens === lengths[i]), "5 concurrent requests all complete",
      JSON.stringify(all.map((r) => r.usage)));
check(all[2].choices[0].text === expected.text, "a queued greedy request still equals the CLI's text");

// A client that disconnects mid-stream frees the slot.
const cancelledBefore = await metric('dsv4_requests_total{outcome="cancelled"}');
const tokensBefore = await metric("dsv4_generation_tokens_total");
const controller = new AbortController();
const long = await client.completions.create({ ...greedy, max_tokens: 200, stream: true }, { signal: controller.signal });
let seen = 0;
try {
  for await (const chunk of long) {
    if (++seen === 2) controller.abort();
  }
} catch (e) {
  // the abort ends the iteration
}
const t0 = Date.now();
const after = await client.completions.create({ ...greedy, max_tokens: 2 });
check(after.usage.completion_tokens === 2, "a request after the disconnect completes");
let cancelled = cancelledBefore;
for (let i = 0; i < 50 && cancelled === cancelledBefore; ++i) {
  await new Promise((r) => setTimeout(r, 100));
  cancelled = await metric('dsv4_requests_total{outcome="cancelled"}');
}
const tokensAfter = await metric("dsv4_generation_tokens_total");
check(cancelled === cancelledBefore + 1, "the disconnected stream is counted cancelled", `${cancelledBefore} -> ${cancelled}`);
check(tokensAfter - tokensBefore < 200 + 2, "the disconnected stream stopped early",
      `${tokensAfter - tokensBefore} tokens in ${Date.now() - t0} ms`);

// Malformed requests: 4xx with an OpenAI error body, never reaching the engine.
const okBefore = await metric('dsv4_requests_total{outcome="ok"}');
const bad = await fetch(`${base}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" }, body: "{bad json" });
const badBody = await bad.json();
check(bad.status === 400 && badBody.error.type === "invalid_request_error", "bad JSON is a 400 with an error body", JSON.stringify(badBody));
const refused = async (what, req, status) => {
  try {
    await client.completions.create(req);
    check(false, what, "was accepted");
  } catch (e) {
    check(e.status === status && e.error && typeof e.error.message === "string", what, `${e.status} ${e.message}`);
  }
};
await refused("an unknown model is a 404", { ...greedy, model: "no-such-model" }, 404);
await refused("max_tokens past max_seq is a 400", { ...greedy, max_tokens: 100000 }, 400);
await refused("temperature < 0 is a 400", { ...greedy, temperature: -1 }, 400);
await refused("n > 1 is a 400", { ...greedy, n: 2 }, 400);
check(await metric('dsv4_requests_total{outcome="ok"}') === okBefore, "refused requests never reached the engine");

// /tokenize and /detokenize round trip.
const tok = await (await fetch(`${base}/tokenize`, { method: "POST", body: JSON.stringify({ prompt: "Hello, 世界" }) })).json();
const detok = await (await fetch(`${base}/detokenize`, { method: "POST", body: JSON.stringify({ tokens: tok.tokens.slice(1) }) })).json();
check(tok.count === tok.tokens.length && detok.prompt === "Hello, 世界", "/tokenize and /detokenize round trip", JSON.stringify([tok, detok]));
check(await metric("dsv4_queue_depth") === 0, "the queue is empty at the end");
const metricsText = await (await fetch(`${base}/metrics`)).text();
check(/dsv4_time_to_first_token_seconds_count [1-9]/.test(metricsText) && /dsv4_time_per_output_token_seconds_count [1-9]/.test(metricsText),
      "/metrics has TTFT and TPOT histograms");

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
