#!/usr/bin/env node
// mock_llm.js - a scripted LLM server for ludo's tests and bench-llm
// (Node standard library only). Loopback only.
//
// Usage:
//   node spec/llm/mock_llm.js [--port N] [--script FILE.json]
// It listens on 127.0.0.1 (port 0, the default: an ephemeral port) and
// prints one line on stdout once ready:
//   mock-llm listening on http://127.0.0.1:PORT
// Point clients at base_url = "http://127.0.0.1:PORT/v1" (any prefix
// works). Stop it with SIGTERM / SIGINT.
//
// The two APIs:
//   POST {base}/chat/completions   OpenAI-compatible chat completions:
//     replies {"id", "object": "chat.completion", "model",
//              "choices": [{"index": 0, "message": {"role": "assistant",
//              "content": TEXT}, "finish_reason": "stop"}],
//              "usage": {"prompt_tokens", "completion_tokens",
//              "total_tokens"}}
//   POST {base}/messages           Anthropic Messages: needs the headers
//     anthropic-version and (when a key is required) x-api-key, and
//     max_tokens in the body (else 400 as Anthropic does); replies
//     {"id", "type": "message", "role": "assistant", "model",
//      "content": [{"type": "text", "text": TEXT}],
//      "stop_reason": "end_turn", "usage": {"input_tokens",
//      "output_tokens"}}
//   Errors have the APIs' shape: {"error": {"type", "message"}}.
//   Token counts: words (whitespace-separated) of every message's content
//   (system included) for the prompt, of TEXT for the completion, unless
//   a rule gives them.
//
// The script (a JSON object; from --script, or POSTed to /_mock/script at
// any time, which replaces it and clears the rules' counters):
//   {
//     "default": "text",          // reply when no rule applies ("ok")
//     "delay_ms": 0,              // delay of every reply without its own
//     "require_key": "k",         // 401 unless Authorization: Bearer k /
//                                 // x-api-key: k
//     "record": true,             // keep every request (false: only count)
//     "rules": [                  // the first rule that applies wins
//       {"match": "regex",        // against the last user message's
//                                 // content (JavaScript RegExp); absent:
//                                 // every request
//        "api": "openai",         // only this API ("anthropic")
//        "times": 2,              // applies to its first 2 matches only
//                                 // (then the next rules are tried):
//                                 // "fail the first N times"
//        "reply": "text",         // the reply's text
//        "echo": true,            // reply with the last user message
//        "delay_ms": 50,          // wait before answering
//        "status": 429,           // answer with this status and an error
//        "message": "slow down",  //   body carrying this message
//        "retry_after": "1",      //   and a Retry-After header (seconds
//                                 //   or an HTTP date)
//        "body": "raw text",      // send exactly this body (status 200
//                                 // unless "status"): malformed replies
//        "bytes": 1000000,        // a valid reply whose text has this
//                                 // many bytes (big replies)
//        "drop": true,            // close the connection without a reply
//        "hang": true,            // never answer (client timeouts)
//        "body_base64": "...",    // send exactly these bytes (invalid
//                                 // UTF-8 in an error body)
//        "echo_key": true,        // a reply whose text and finish reason
//                                 // carry the key the request sent
//        "endless_trailers": true,// a chunked 200 whose trailer lines
//                                 // never end (until the client goes)
//        "prompt_tokens": 7, "completion_tokens": 3,
//        "finish_reason": "length"}
//     ]
//   }
//
// Control routes (tests read what the server saw):
//   GET  /_mock/requests  [{"api", "path", "headers", "body" (parsed),
//                           "t_ms" (arrival, ms since start)}, ...]
//   GET  /_mock/stats     {"requests", "in_flight", "max_in_flight",
//                          "connections", "max_connections"}
//   POST /_mock/reset     clears requests and stats (the script stays)
//   POST /_mock/script    replaces the script (body: the JSON above)
'use strict';

const http = require('http');
const fs = require('fs');

const started = process.hrtime.bigint();
const nowMs = () => Number(process.hrtime.bigint() - started) / 1e6;

let script = { rules: [] };
let hits = [];               // per rule: matches so far
let requests = [];
let stats = {};

function resetStats() {
  requests = [];
  stats = { requests: 0, in_flight: 0, max_in_flight: 0,
            connections: stats.connections || 0,
            max_connections: stats.connections || 0 };
}

function setScript(s) {
  if (typeof s !== 'object' || s === null) throw new Error('script must be an object');
  s.rules = s.rules || [];
  for (const r of s.rules) if (r.match !== undefined) r.re = new RegExp(r.match);
  script = s;
  hits = s.rules.map(() => 0);
}

function words(s) {
  const t = String(s || '').trim();
  return t === '' ? 0 : t.split(/\s+/).length;
}

function lastUser(body) {
  const msgs = Array.isArray(body.messages) ? body.messages : [];
  for (let i = msgs.length - 1; i >= 0; i--)
    if (msgs[i] && msgs[i].role === 'user') return String(msgs[i].content);
  return '';
}

function promptWords(body) {
  let n = words(body.system);
  for (const m of body.messages || []) n += words(m && m.content);
  return n;
}

function pickRule(api, body) {
  const text = lastUser(body);
  for (let i = 0; i < script.rules.length; i++) {
    const r = script.rules[i];
    if (r.api && r.api !== api) continue;
    if (r.re && !r.re.test(text)) continue;
    if (r.times !== undefined && hits[i] >= r.times) continue;
    hits[i]++;
    return r;
  }
  return {};
}

function send(res, status, obj, headers) {
  const text = typeof obj === 'string' || Buffer.isBuffer(obj) ? obj
    : JSON.stringify(obj);
  const h = ['Content-Type', 'application/json',
             'Content-Length', String(Buffer.byteLength(text))];
  if (headers) for (const k in headers) h.push(k, headers[k]);
  res.writeHead(status, h);
  res.end(text);
}

function apiError(api, status, message) {
  const type = status === 429 ? 'rate_limit_error'
    : status >= 500 ? 'api_error' : 'invalid_request_error';
  return api === 'anthropic'
    ? { type: 'error', error: { type, message } }
    : { error: { message, type, code: null } };
}

// The key a request sent (Authorization: Bearer K or x-api-key: K).
function keyOf(req) {
  const a = req.headers.authorization || '';
  return a.startsWith('Bearer ') ? a.slice(7) : req.headers['x-api-key'] || '';
}

// Writes a chunked 200 with an empty object, then trailer lines for ever.
function endlessTrailers(socket) {
  socket.write('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n' +
               'Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n');
  const line = 'X-Trailer: ' + 'a'.repeat(1000) + '\r\n';
  const pump = () => {
    while (!socket.destroyed && socket.write(line)) {}
    if (!socket.destroyed) socket.once('drain', pump);
  };
  socket.on('error', () => {});
  pump();
}

function okBody(api, body, rule, req) {
  let text = rule.echo ? lastUser(body)
    : rule.reply !== undefined ? String(rule.reply)
    : script.default !== undefined ? String(script.default) : 'ok';
  let finish = rule.finish_reason;
  if (rule.bytes) text = 'x'.repeat(rule.bytes);
  if (rule.echo_key) {
    text = 'your key is ' + keyOf(req);
    finish = 'k=' + keyOf(req);
  }
  const pt = rule.prompt_tokens !== undefined ? rule.prompt_tokens : promptWords(body);
  const ct = rule.completion_tokens !== undefined ? rule.completion_tokens : words(text);
  const model = body.model || 'mock';
  if (api === 'anthropic')
    return { id: 'msg_mock', type: 'message', role: 'assistant', model,
             content: [{ type: 'text', text }],
             stop_reason: finish || 'end_turn',
             usage: { input_tokens: pt, output_tokens: ct } };
  return { id: 'chatcmpl-mock', object: 'chat.completion', model,
           choices: [{ index: 0, message: { role: 'assistant', content: text },
                       finish_reason: finish || 'stop' }],
           usage: { prompt_tokens: pt, completion_tokens: ct,
                    total_tokens: pt + ct } };
}

// A reason to refuse the request as the real API would, or null.
function refuse(api, req, body) {
  const key = script.require_key;
  if (key !== undefined) {
    const got = api === 'anthropic' ? req.headers['x-api-key']
      : (req.headers.authorization || '').replace(/^Bearer /, '');
    if (got !== key) return [401, 'invalid api key'];
  }
  if (!body || typeof body.model !== 'string') return [400, 'model is required'];
  if (!Array.isArray(body.messages)) return [400, 'messages must be a list'];
  if (api === 'anthropic') {
    if (!req.headers['anthropic-version']) return [400, 'anthropic-version header is required'];
    if (!Number.isInteger(body.max_tokens)) return [400, 'max_tokens: field required'];
    for (const m of body.messages)
      if (m.role === 'system') return [400, 'system messages go in the top-level system field'];
  }
  return null;
}

function answer(api, req, res, body) {
  const no = refuse(api, req, body);
  if (no) return send(res, no[0], apiError(api, no[0], no[1]));
  const rule = pickRule(api, body);
  const delay = rule.delay_ms !== undefined ? rule.delay_ms : script.delay_ms || 0;
  const go = () => {
    if (rule.drop) return req.socket.destroy();
    if (rule.hang) return;
    if (rule.endless_trailers) return endlessTrailers(req.socket);
    const status = rule.status || 200;
    const headers = rule.retry_after !== undefined
      ? { 'Retry-After': String(rule.retry_after) } : {};
    if (rule.body !== undefined) return send(res, status, String(rule.body), headers);
    if (rule.body_base64 !== undefined)
      return send(res, status, Buffer.from(rule.body_base64, 'base64'), headers);
    if (status !== 200)
      return send(res, status, apiError(api, status, rule.message || 'mock error ' + status), headers);
    send(res, 200, okBody(api, body, rule, req));
  };
  if (delay > 0) setTimeout(go, delay); else go();
}

function control(req, res, raw) {
  if (req.url === '/_mock/requests') return send(res, 200, requests);
  if (req.url === '/_mock/stats') return send(res, 200, stats);
  if (req.url === '/_mock/reset') { resetStats(); return send(res, 200, { ok: true }); }
  if (req.url === '/_mock/script') {
    try { setScript(JSON.parse(raw)); } catch (e) { return send(res, 400, { error: String(e) }); }
    return send(res, 200, { ok: true });
  }
  send(res, 404, { error: 'no such control route' });
}

function apiOf(url) {
  const path = url.split('?')[0];
  if (path.endsWith('/chat/completions')) return 'openai';
  if (path.endsWith('/messages')) return 'anthropic';
  return null;
}

function onRequest(req, res) {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const raw = Buffer.concat(chunks).toString('utf8');
    if (req.url.startsWith('/_mock/')) return control(req, res, raw);
    const api = apiOf(req.url);
    if (req.method !== 'POST' || api === null)
      return send(res, 404, { error: { message: 'no route ' + req.method + ' ' + req.url } });
    let body = null;
    try { body = JSON.parse(raw); } catch (e) { body = null; }
    stats.requests++;
    stats.in_flight++;
    if (stats.in_flight > stats.max_in_flight) stats.max_in_flight = stats.in_flight;
    res.on('close', () => { stats.in_flight--; }); // after finish, or a drop
    if (script.record !== false)
      requests.push({ api, path: req.url, headers: req.headers, body, t_ms: nowMs() });
    answer(api, req, res, body);
  });
}

function main() {
  const args = process.argv.slice(2);
  let port = 0;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--port') port = Number(args[++i]);
    else if (args[i] === '--script') setScript(JSON.parse(fs.readFileSync(args[++i], 'utf8')));
    else { console.error('mock_llm.js: unknown argument ' + args[i]); process.exit(2); }
  }
  resetStats();
  const server = http.createServer(onRequest);
  server.keepAliveTimeout = 120000;
  server.headersTimeout = 125000;
  server.requestTimeout = 0;
  server.maxHeadersCount = 200;
  server.on('connection', (sock) => {
    sock.setNoDelay(true);
    stats.connections++;
    if (stats.connections > stats.max_connections) stats.max_connections = stats.connections;
    sock.on('close', () => { stats.connections--; });
  });
  server.listen({ port, host: '127.0.0.1', backlog: 4096 }, () => {
    process.stdout.write('mock-llm listening on http://127.0.0.1:' + server.address().port + '\n');
  });
  const stop = () => { server.close(); process.exit(0); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
