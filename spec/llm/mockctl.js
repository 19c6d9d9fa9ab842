#!/usr/bin/env node
// mockctl.js - talks to a running mock_llm.js for tests that have no HTTP
// client (a stock lua5.4):
//   node spec/llm/mockctl.js PORT GET /_mock/stats
//   node spec/llm/mockctl.js PORT POST /_mock/script '{"default": "hi"}'
// Prints the response body; exits 1 when the status is not 200.
'use strict';
const http = require('http');

const [port, method, path, body] = process.argv.slice(2);
const req = http.request({ host: '127.0.0.1', port: Number(port), method, path,
  headers: { 'Content-Type': 'application/json' } }, (res) => {
  const chunks = [];
  res.on('data', (c) => chunks.push(c));
  res.on('end', () => {
    process.stdout.write(Buffer.concat(chunks));
    process.exit(res.statusCode === 200 ? 0 : 1);
  });
});
req.on('error', (e) => { console.error('mockctl: ' + e.message); process.exit(1); });
req.end(body || '');
