// mcp_sdk_test.mjs - `ludo serve` against the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, Streamable HTTP transport): the MCP
// handshake, tools/list, tools/call and its errors, as a real MCP client
// does them. Usage: node spec/serve/mcp_sdk_test.mjs LUDO_BINARY. Prints
// "ok NAME" / "FAIL NAME: why" and "N passed, N failed".
import { spawn } from "node:child_process";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ludo = process.argv[2] || "build/ludo";
let passed = 0, failed = 0;

function startServer(env = "examples/echo") {
  return new Promise((resolve, reject) => {
    const p = spawn(ludo, ["serve", env, "--port", "0"],
      { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    p.stderr.on("data", (d) => {
      err += d;
      const m = err.match(/http:\/\/[^:]+:(\d+)/);
      if (m) resolve({ p, port: Number(m[1]) });
    });
    p.on("exit", (code) => reject(new Error("server exited " + code + ": " + err)));
  });
}

async function test(name, fn) {
  try {
    await fn();
    console.log("ok " + name);
    passed++;
  } catch (e) {
    console.log("FAIL " + name + ": " + (e && e.stack || e));
    failed++;
  }
}

function check(cond, why) { if (!cond) throw new Error(why); }

const { p, port } = await startServer();
const url = new URL(`http://127.0.0.1:${port}/mcp`);
const client = new Client({ name: "ludo-test", version: "1.0.0" });

await test("mcp_sdk_connects", async () => {
  await client.connect(new StreamableHTTPClientTransport(url));
  const info = client.getServerVersion();
  check(info && info.name === "echo_env", JSON.stringify(info));
  check(client.getServerCapabilities().tools, "no tools capability");
});

await test("mcp_sdk_lists_tools", async () => {
  const r = await client.listTools();
  const names = r.tools.map((t) => t.name);
  check(JSON.stringify(names) === '["echo_message","echo_with_length"]',
    JSON.stringify(names));
  check(r.tools[0].inputSchema.type === "object", JSON.stringify(r.tools[0]));
});

await test("mcp_sdk_calls_tools", async () => {
  let r = await client.callTool({ name: "echo_message",
    arguments: { message: "from the sdk" } });
  check(r.content[0].text === "from the sdk" && r.isError === false,
    JSON.stringify(r));
  r = await client.callTool({ name: "echo_with_length",
    arguments: { message: "abc" } });
  check(r.structuredContent.length === 3, JSON.stringify(r));
});

await test("mcp_sdk_tool_errors", async () => {
  let threw = false;
  try {
    await client.callTool({ name: "nope", arguments: {} });
  } catch (e) {
    threw = /nope/.test(String(e.message));
  }
  check(threw, "an unknown tool did not fail with its name");
});

await test("mcp_sdk_ping_and_close", async () => {
  await client.ping();
  await client.close();
});

// An environment without tools offers no tools capability: the SDK
// lists none (it would fail on tools/list) and the session works.
await test("mcp_sdk_env_without_tools", async () => {
  const s = await startServer("spec/fixtures/serve/slow");
  try {
    const c = new Client({ name: "ludo-test", version: "1.0.0" });
    await c.connect(new StreamableHTTPClientTransport(
      new URL(`http://127.0.0.1:${s.port}/mcp`)));
    check(c.getServerCapabilities().tools === undefined,
      JSON.stringify(c.getServerCapabilities()));
    await c.ping();
    await c.close();
  } finally {
    s.p.kill("SIGTERM");
  }
});

p.kill("SIGTERM");
const code = await new Promise((resolve) => p.on("exit", resolve));
await test("mcp_sdk_server_exit", async () => check(code === 0, "exit " + code));
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
