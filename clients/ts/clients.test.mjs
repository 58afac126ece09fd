// Drives a built airlock with the official MCP TypeScript SDK (@modelcontextprotocol/sdk,
// a client nobody on the project wrote) over stdio, Streamable HTTP and SSE.
// Run: clients/ts/run.sh (installs the SDK into the npm cache like scripts/npm-tools.sh)
// Env: AIRLOCK_BIN (default bin/airlock), AIRLOCK_TS_SDK (the SDK's install directory).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const bin = path.resolve(process.env.AIRLOCK_BIN || 'bin/airlock');
const sdkDir = process.env.AIRLOCK_TS_SDK;
assert.ok(sdkDir, 'AIRLOCK_TS_SDK must name the directory the SDK is installed in');
const sdk = (p) => import(path.join(sdkDir, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p));
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { SSEClientTransport } = await sdk('client/sse.js');

const token = 'client-test-token';
// Lowercase scheme on purpose: RFC 7235 makes it case-insensitive.
const auth = { Authorization: `bearer ${token}` };
const serverArgs = ['-max-parallel', '8', '-queue-size', '16'];
const hex = (n) => randomBytes(n).toString('hex');

// startHTTP runs `airlock serve -http|-sse 127.0.0.1:0` and resolves its endpoint.
function startHTTP(t, flag) {
  const child = spawn(bin, ['serve', flag, '127.0.0.1:0', '-auth-token', token, ...serverArgs], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  t.after(() => child.kill('SIGINT'));
  let log = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`airlock did not start:\n${log}`)), 30000);
    child.stderr.on('data', (d) => {
      log += d;
      const m = /endpoint=(http:\/\/\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => reject(new Error(`airlock exited ${code}:\n${log}`)));
  });
}

const transports = {
  stdio: async () => new StdioClientTransport({ command: bin, args: ['serve', ...serverArgs], stderr: 'ignore' }),
  'streamable-http': async (t) =>
    new StreamableHTTPClientTransport(new URL(await startHTTP(t, '-http')), { requestInit: { headers: auth } }),
  sse: async (t) => new SSEClientTransport(new URL(await startHTTP(t, '-sse')), { requestInit: { headers: auth } }),
};

// withArg lists host processes with arg in their command line.
function withArg(arg) {
  const pids = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      if (readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0').includes(arg)) pids.push(d);
    } catch {
      // the process is gone
    }
  }
  return pids;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const pngProgram = `import struct, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(b"\\x00\\xff\\x00\\x00")) + chunk(b"IEND", b"")
open("out/dot.png", "wb").write(png)
print("wrote", len(png))`;

for (const [name, make] of Object.entries(transports)) {
  test(`TypeScript SDK over ${name}`, { timeout: 180000 }, async (t) => {
    const transport = await make(t);
    const client = new Client({ name: 'airlock-ts-sdk-test', version: '1' });
    await client.connect(transport);
    t.after(() => client.close());
    // Every message the SDK receives, in order, below its dispatch.
    const wire = [];
    const deliver = transport.onmessage;
    transport.onmessage = (m, extra) => {
      if (m.method === 'notifications/progress' || 'result' in m || 'error' in m) wire.push(m);
      deliver(m, extra);
    };
    // callTool validates structuredContent against the cached outputSchema itself and
    // throws when it does not conform; it also throws when a tool with an outputSchema
    // returns none (unless isError, so that is checked here).
    const run = async (args, opts) => {
      const r = await client.callTool({ name: 'run_code', arguments: args }, undefined, { timeout: 60000, ...opts });
      assert.ok(r.structuredContent, `no structuredContent (isError=${r.isError}): ${JSON.stringify(r.content)}`);
      return r;
    };
    const text = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('');

    await t.test('initialize', () => {
      assert.equal(client.getServerVersion()?.name, 'airlock');
      assert.ok(client.getServerCapabilities()?.tools);
    });
    await t.test('tools/list', async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((x) => x.name).sort(), ['get_config', 'probe_sandbox', 'run_code']);
      assert.ok(tools.find((x) => x.name === 'run_code').outputSchema, 'run_code has an outputSchema');
      assert.ok(client.getToolOutputValidator('run_code'), 'the SDK compiled a validator for it');
    });
    await t.test('print', async () => {
      const r = await run({ code: "print('hello from', 6*7)" });
      assert.equal(r.isError ?? false, false);
      assert.equal(r.structuredContent.status, 'ok');
      assert.equal(r.structuredContent.stdout, 'hello from 42\n');
    });
    await t.test('error exit', async () => {
      const r = await run({ code: "import sys\nprint('bye', file=sys.stderr)\nsys.exit(3)" });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.status, 'error');
      assert.equal(r.structuredContent.exit_code, 3);
      assert.equal(r.structuredContent.stderr, 'bye\n');
    });
    await t.test('timeout', async () => {
      const r = await run({ code: 'while True: pass', timeout_seconds: 1 });
      assert.equal(r.isError, true);
      assert.equal(r.structuredContent.status, 'timeout');
    });
    await t.test('image artifact', async () => {
      const r = await run({ code: pngProgram });
      const img = r.content.find((c) => c.type === 'image');
      assert.ok(img, `no image content: ${JSON.stringify(r.structuredContent)}`);
      assert.equal(img.mimeType, 'image/png');
      assert.equal(Buffer.from(img.data, 'base64').subarray(0, 4).toString('latin1'), '\x89PNG');
      assert.equal(r.structuredContent.artifacts.length, 1);
    });
    await t.test('escape sequences', async () => {
      const r = await run({ code: 'print("\\x1b[31mred\\x1b[0m\\x07 \\x1b]0;title\\x07 \\u202eevil")' });
      const out = r.structuredContent.stdout;
      for (const bad of ['\x1b', '\x07', '\u202e']) {
        assert.ok(!out.includes(bad) && !text(r).includes(bad), `${JSON.stringify(bad)} reached the client: ${JSON.stringify(out)}`);
      }
      assert.match(out, /red/);
      assert.match(out, /evil/);
    });
    await t.test('refusals', async () => {
      for (const args of [{ code: '1', language: 'cobol' }, { code: '1', steps: 2 }, { code: '1', timeout_seconds: -1 }, { language: 'python' }]) {
        const r = await run(args);
        assert.equal(r.isError, true, JSON.stringify(args));
        assert.equal(r.structuredContent.status, 'invalid_request', JSON.stringify(args));
        assert.equal(r.structuredContent.detail, text(r));
      }
    });
    await t.test('progress', async () => {
      const seen = [];
      const marker = `done-${hex(6)}`;
      const r = await run({ code: `import time\ntime.sleep(3.5)\nprint(${JSON.stringify(marker)})` }, { onprogress: (p) => seen.push(p.progress) });
      assert.equal(r.structuredContent.stdout, `${marker}\n`);
      // The SDK's progress token is the request's id: find the response and its ticks.
      const resp = wire.findIndex((m) => JSON.stringify(m.result ?? '').includes(marker));
      const id = wire[resp].id;
      const ticks = wire.map((m, i) => ({ m, i })).filter(({ m }) => m.method === 'notifications/progress' && m.params.progressToken === id);
      const want = Math.floor(r.structuredContent.wall_ms / 1000);
      assert.ok(want >= 3 && ticks.length >= want, `${ticks.length} progress notifications for a ${r.structuredContent.wall_ms} ms run, want at least ${want}`);
      ticks.forEach(({ m, i }, k) => {
        assert.ok(i < resp, `progress ${m.params.progress} arrived after the result`);
        if (k > 0) assert.ok(m.params.progress > ticks[k - 1].m.params.progress, 'progress values strictly increase');
      });
      await sleep(200);
      assert.equal(seen.length, ticks.length, 'the SDK handed every tick to onprogress');
    });
    await t.test('cancel', async () => {
      const marker = `airlock-cancel-${hex(8)}`;
      const ac = new AbortController();
      const call = client
        .callTool({ name: 'run_code', arguments: { code: `import os, sys\nos.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', ${JSON.stringify(marker)}])` } }, undefined, { signal: ac.signal, timeout: 60000 })
        .then(() => 'answered', (e) => e);
      for (const deadline = Date.now() + 20000; withArg(marker).length === 0; await sleep(20)) {
        assert.ok(Date.now() < deadline, 'the sandboxed program never showed up on the host');
      }
      ac.abort('test cancels');
      const t0 = Date.now();
      while (withArg(marker).length > 0) {
        assert.ok(Date.now() - t0 < 2000, `the sandboxed program ${withArg(marker)} is still on the host 2 s after the cancel`);
        await sleep(10);
      }
      t.diagnostic(`sandbox gone ${Date.now() - t0} ms after the cancel`);
      assert.notEqual(await call, 'answered');
      const r = await run({ code: "print('alive')" });
      assert.equal(r.structuredContent.stdout, 'alive\n', 'the session survives the cancel');
    });
    await t.test('8 parallel calls', async () => {
      const rs = await Promise.all(
        [...Array(8).keys()].map((i) => run({ code: `import time\ntime.sleep(0.5)\nprint(${i})` })),
      );
      rs.forEach((r, i) => assert.equal(r.structuredContent.stdout, `${i}\n`));
    });
    await t.test('20 MB message', async () => {
      const t0 = Date.now();
      const got = await client
        .callTool({ name: 'run_code', arguments: { code: '#'.repeat(20 << 20) } }, undefined, { timeout: 20000 })
        .then((r) => r, (e) => e);
      assert.ok(got instanceof Error || got.isError, 'a 20 MB message was run');
      assert.ok(!/timed out/i.test(String(got.message)), `no answer within 20 s: ${got.message}`);
      t.diagnostic(`refused in ${Date.now() - t0} ms: ${String(got.message ?? text(got)).slice(0, 160)}`);
      const r = await run({ code: "print('alive')" });
      assert.equal(r.structuredContent.stdout, 'alive\n', 'the session survives the 20 MB message');
    });
  });
}
