// `kope mcp` driven end to end by the official MCP TypeScript SDK client, over stdio and over
// Streamable HTTP: tools, evaluation of a correct and a wrong kernel, retrieval, recording an
// attempt and reading it back, a short run against the fake model, malformed requests and a
// cancelled evaluation. Run by ctest (tests/mcp/CMakeLists.txt) as `node sdk_e2e.test.mjs`.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';

import {
  alive, childrenOf, descendantsOf, kernels, kopeExe, makeProject, rawStdio, requireNodeModules, serverArgs, sleep, startFakeModel,
  startHttpServer,
} from './support.mjs';

requireNodeModules();
const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');

const TOOLS = ['list_ops', 'show_op', 'hardware', 'eval_kernel', 'bench_op', 'retrieve_experience', 'record_attempt',
  'start_run', 'run_status', 'run_report'];
const LONG = { timeout: 600000 };  // evaluations wait for the machine's timing lock

function structured(result) {
  assert.ok(result.structuredContent, `no structuredContent: ${JSON.stringify(result)}`);
  // The text item carries the same JSON.
  assert.deepEqual(JSON.parse(result.content[0].text), result.structuredContent);
  return result.structuredContent;
}

// What both transports must do: the tools, evaluations, retrieval, recording, cancellation.
function commonTests(ctx) {
  test('lists the tools, each with an input and an output schema', async () => {
    const { tools } = await ctx.client.listTools();
    assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
    for (const t of tools) {
      assert.equal(t.inputSchema.type, 'object', t.name);
      assert.equal(t.outputSchema.type, 'object', t.name);
    }
  });

  test('list_ops and show_op give the CLI\'s JSON', async () => {
    const ops = structured(await ctx.client.callTool({ name: 'list_ops', arguments: {} }));
    assert.ok(ops.ops.some((o) => o.name === 'e2e_scale'), JSON.stringify(ops));
    const show = structured(await ctx.client.callTool({ name: 'show_op', arguments: { op: 'e2e_scale' } }));
    const cli = spawnSync(kopeExe, ['ops', 'show', 'e2e_scale', '--suite', ctx.suite, '--json'], { env: ctx.project.env, encoding: 'utf8' });
    assert.equal(cli.status, 0, cli.stderr);
    const { spec_toml: specToml, reference_source: reference, ...rest } = show;
    assert.deepEqual(rest, JSON.parse(cli.stdout));
    assert.match(specToml, /name = "e2e_scale"/);
    assert.match(reference, /kope_kernel/);
    const unknown = await ctx.client.callTool({ name: 'show_op', arguments: { op: 'no_such_op' } });
    assert.equal(unknown.isError, true);
    assert.match(unknown.content[0].text, /no_such_op/);
  });

  test('eval_kernel: a correct kernel, with progress notifications', LONG, async () => {
    const progress = [];
    const r = await ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'e2e_scale', source: kernels.correct } }, undefined,
      { onprogress: (p) => progress.push(p), timeout: 600000 });
    const j = structured(r);
    assert.equal(j.verdict, 'correct', j.message);
    assert.equal(r.isError, false);
    assert.ok(j.cases.length >= 5);
    assert.ok(j.timing.length >= 1 && j.timing[0].roofline_us > 0);
    assert.ok(j.speedup_vs_reference > 0);
    assert.ok(progress.length >= 1, 'no progress notification');
  });

  test('eval_kernel: a wrong kernel and one that does not compile are results with isError', LONG, async () => {
    const wrong = await ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'e2e_scale', source: kernels.wrong, no_time: true } },
      undefined, { timeout: 600000 });
    assert.equal(wrong.isError, true);
    assert.equal(structured(wrong).verdict, 'wrong_result');
    const broken = await ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'e2e_scale', source: kernels.broken } },
      undefined, { timeout: 600000 });
    assert.equal(broken.isError, true);
    assert.equal(structured(broken).verdict, 'compile_error');
    const unknown = await ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'no_such_op', source: kernels.correct } });
    assert.equal(unknown.isError, true);
    assert.match(unknown.content[0].text, /no_such_op/);
  });

  test('bad arguments are a protocol error (-32602)', async () => {
    await assert.rejects(ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'e2e_scale' } }), /-32602|source/);
    await assert.rejects(ctx.client.callTool({ name: 'no_such_tool', arguments: {} }), /-32602|unknown tool/);
  });

  test('record_attempt records kope\'s verdict, not the claimed one, and it reads back', LONG, async () => {
    const r = await ctx.client.callTool({ name: 'record_attempt', arguments: {
      op: 'e2e_scale', source: kernels.wrong, verdict: 'correct', optimisation: 'triples instead of doubling' } },
    undefined, { timeout: 600000 });
    const j = structured(r);
    assert.equal(j.verdict, 'wrong_result');
    assert.equal(j.claimed_verdict, 'correct');
    assert.equal(j.claimed_verdict_ignored, true);
    assert.ok(j.case_id > 0);
    const read = await ctx.client.readResource({ uri: `kope://memory/cases/${j.case_id}` });
    const stored = JSON.parse(read.contents[0].text);
    assert.equal(stored.verdict, 'wrong_result');
    assert.equal(stored.code, kernels.wrong);
    const good = structured(await ctx.client.callTool({ name: 'record_attempt', arguments: { op: 'e2e_scale', source: kernels.correct } },
      undefined, { timeout: 600000 }));
    assert.equal(good.verdict, 'correct');
    assert.equal(good.claimed_verdict_ignored, false);
    // Retrieval now knows the op's cases.
    const got = structured(await ctx.client.callTool({ name: 'retrieve_experience', arguments: { op: 'e2e_scale', stage: 'draft' } }));
    assert.ok(Array.isArray(got.admitted));
    assert.equal(got.stage, 'draft');
    for (const item of got.admitted) assert.ok(item.reason !== undefined, JSON.stringify(item));
  });

  test('a memory that cannot be opened is a result with isError', async () => {
    const r = await ctx.client.callTool({ name: 'retrieve_experience', arguments: { op: 'e2e_scale', memory: '/proc/version/memory.db' } });
    assert.equal(r.isError, true);
  });

  test('resources: op specs and references', async () => {
    const { resources } = await ctx.client.listResources();
    const uris = resources.map((r) => r.uri);
    assert.ok(uris.includes('kope://ops/e2e_scale/spec'));
    assert.ok(uris.includes('kope://ops/e2e_scale/reference'));
    const spec = await ctx.client.readResource({ uri: 'kope://ops/e2e_scale/spec' });
    assert.match(spec.contents[0].text, /name = "e2e_scale"/);
    await assert.rejects(ctx.client.readResource({ uri: 'kope://ops/nope/spec' }), /-32002|not found/);
    const { resourceTemplates } = await ctx.client.listResourceTemplates();
    assert.ok(resourceTemplates.some((t) => t.uriTemplate === 'kope://memory/cases/{id}'));
  });

  test('a cancelled evaluation stops its processes, and the server keeps serving', LONG, async () => {
    const abort = new AbortController();
    let progressed = false;
    const call = ctx.client.callTool({ name: 'eval_kernel', arguments: { op: 'e2e_scale', source: kernels.slow } }, undefined,
      { signal: abort.signal, timeout: 600000, onprogress: () => { progressed = true; } });
    for (let i = 0; i < 600 && ctx.evalChildren().length === 0; ++i) await sleep(100);
    assert.ok(ctx.evalChildren().length > 0, 'the evaluation never started');
    // `kope eval` and what it started (the sandbox, the compiler or the kernel runner).
    const evaluation = () => ctx.evalChildren().flatMap((p) => [p, ...descendantsOf(p)]);
    // Before its first child (the hardware probe, the compiler, the sandbox) an evaluation may
    // wait for the machine's timing lock, which other tests of a full suite hold for minutes.
    for (let i = 0; i < 4000 && evaluation().length < 2; ++i) await sleep(100);
    await sleep(1000);
    const started = evaluation();
    assert.ok(started.length > 1, 'no sandboxed process under kope eval');
    abort.abort('the test cancels');
    await assert.rejects(call);
    for (let i = 0; i < 100 && alive(started).length > 0; ++i) await sleep(100);
    assert.deepEqual(alive(started), [], 'processes of the cancelled evaluation are still running');
    assert.ok(progressed);
    await ctx.client.ping();
    const ops = structured(await ctx.client.callTool({ name: 'list_ops', arguments: {} }));
    assert.ok(ops.ops.length >= 2);
  });
}

describe('kope mcp over stdio (SDK StdioClientTransport)', () => {
  const ctx = {};
  let fake;
  before(async () => {
    ctx.project = await makeProject('stdio');
    ctx.suite = (await import('./support.mjs')).e2eOps;
    fake = await startFakeModel(ctx.project);
    ctx.transport = new StdioClientTransport({ command: kopeExe, args: serverArgs(ctx.project), cwd: ctx.project.dir, env: ctx.project.env, stderr: 'inherit' });
    ctx.client = new Client({ name: 'kope-mcp-test', version: '1.0.0' });
    await ctx.client.connect(ctx.transport);
    ctx.evalChildren = () => childrenOf(ctx.transport.pid, ' eval ');
  });
  after(async () => {
    await ctx.client?.close();
    fake?.stop();
    ctx.project?.cleanup();
  });

  commonTests(ctx);

  test('bench_op times the reference against the roofline (kope bench --json)', LONG, async () => {
    const j = structured(await ctx.client.callTool({ name: 'bench_op', arguments: { ops: ['e2e_scale'], max_seconds: 0.5, target_ci: 0.2 } },
      undefined, { timeout: 600000 }));
    assert.equal(j.rows.length, 1);
    assert.equal(j.rows[0].op, 'e2e_scale');
    assert.ok(j.rows[0].reference_us > 0 && j.rows[0].roofline_us > 0);
  });

  test('start_run runs kope run against the fake model; run_status follows it to the end', LONG, async () => {
    const started = structured(await ctx.client.callTool({ name: 'start_run', arguments: {
      ops: 'e2e_scale', iterations: 2, llm: 'fake', seed: 7, patience: 0, roofline_target: 0, no_starter: true } }));
    assert.ok(started.run);
    let status;
    const seen = new Set();
    for (let i = 0; i < 600; ++i) {
      status = structured(await ctx.client.callTool({ name: 'run_status', arguments: { run: started.run } }));
      seen.add(status.state);
      if (status.state !== 'running') break;
      await sleep(500);
    }
    assert.equal(status.state, 'finished', JSON.stringify(status));
    assert.equal(status.ops_done, 1);
    assert.equal(status.attempts, 2);
    assert.equal(status.complete, true);
    const report = structured(await ctx.client.callTool({ name: 'run_report', arguments: { run: started.run } }));
    assert.equal(report.results.complete, true);
    assert.equal(report.results.ops[0].name, 'e2e_scale');
    assert.equal(report.results.ops[0].attempts, 2);
    // Its report is a resource now.
    const { resources } = await ctx.client.listResources();
    assert.ok(resources.some((r) => r.uri === `kope://runs/${started.run}/results.json`));
    const unknown = await ctx.client.callTool({ name: 'run_status', arguments: { run: 'no-such-run' } });
    assert.equal(unknown.isError, true);
  });
});

describe('kope mcp over Streamable HTTP (SDK StreamableHTTPClientTransport)', () => {
  const ctx = {};
  let server;
  before(async () => {
    ctx.project = await makeProject('http');
    ctx.suite = (await import('./support.mjs')).e2eOps;
    server = await startHttpServer(ctx.project);
    ctx.url = server.url;
    ctx.transport = new StreamableHTTPClientTransport(new URL(server.url));
    ctx.client = new Client({ name: 'kope-mcp-test', version: '1.0.0' });
    await ctx.client.connect(ctx.transport);
    ctx.evalChildren = () => childrenOf(server.pid, ' eval ');
  });
  after(async () => {
    await ctx.transport?.terminateSession().catch(() => {});
    await ctx.client?.close();
    server?.stop();
    ctx.project?.cleanup();
  });

  commonTests(ctx);

  test('HTTP: malformed JSON, a missing session, a foreign Origin, GET and DELETE', async () => {
    const post = (body, headers = {}) => fetch(ctx.url, { method: 'POST', body,
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers } });
    const bad = await post('{"jsonrpc":"2.0",');
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, -32700);
    const noSession = await post('{"jsonrpc":"2.0","id":1,"method":"ping"}');
    assert.equal(noSession.status, 400);
    const unknownSession = await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', { 'Mcp-Session-Id': 'nope' });
    assert.equal(unknownSession.status, 404);
    const evil = await post('{"jsonrpc":"2.0","id":1,"method":"ping"}', { Origin: 'http://evil.example' });
    assert.equal(evil.status, 403);
    const sid = ctx.transport.sessionId;
    const unknownMethod = await post('{"jsonrpc":"2.0","id":2,"method":"nope"}', { 'Mcp-Session-Id': sid });
    assert.equal((await unknownMethod.json()).error.code, -32601);
    const badVersion = await post('{"jsonrpc":"2.0","id":3,"method":"ping"}', { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '1999-01-01' });
    assert.equal(badVersion.status, 400);
    assert.equal((await fetch(ctx.url, { method: 'GET', headers: { 'Mcp-Session-Id': sid } })).status, 405);
    // A session of its own, ended with DELETE.
    const init = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }));
    const own = init.headers.get('mcp-session-id');
    assert.ok(own);
    assert.equal((await fetch(ctx.url, { method: 'DELETE', headers: { 'Mcp-Session-Id': own } })).status, 200);
    assert.equal((await post('{"jsonrpc":"2.0","id":4,"method":"ping"}', { 'Mcp-Session-Id': own })).status, 404);
  });

  test('HTTP: a non-loopback address needs --allow-remote and a token; the token is checked', async () => {
    const refused = spawnSync(kopeExe, serverArgs(ctx.project, ['--http', '0.0.0.0:0']), { env: ctx.project.env, encoding: 'utf8' });
    assert.equal(refused.status, 2);
    assert.match(refused.stderr, /--allow-remote and --token-env/);
    const noToken = spawnSync(kopeExe, serverArgs(ctx.project, ['--http', '0.0.0.0:0', '--allow-remote']), { env: ctx.project.env, encoding: 'utf8' });
    assert.equal(noToken.status, 2);
    const env = { ...ctx.project.env, KOPE_TEST_MCP_TOKEN: 's3cret' };
    const guarded = await startHttpServer(ctx.project, ['--token-env', 'KOPE_TEST_MCP_TOKEN'], env);
    const remote = await startHttpServer(ctx.project, ['--allow-remote', '--token-env', 'KOPE_TEST_MCP_TOKEN'], env, '0.0.0.0:0');
    try {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });
      const headers = { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
      assert.equal((await fetch(guarded.url, { method: 'POST', body, headers })).status, 401);
      assert.equal((await fetch(guarded.url, { method: 'POST', body, headers: { ...headers, Authorization: 'Bearer wrong' } })).status, 401);
      const ok = await fetch(guarded.url, { method: 'POST', body, headers: { ...headers, Authorization: 'Bearer s3cret' } });
      assert.equal(ok.status, 200);
      // Served on every address: the token on every request, and no file paths from clients.
      const url = remote.url.replace('0.0.0.0', '127.0.0.1');
      const auth = { ...headers, Accept: 'application/json', Authorization: 'Bearer s3cret' };
      assert.equal((await fetch(url, { method: 'POST', body, headers })).status, 401);
      const init = await fetch(url, { method: 'POST', body, headers: auth });
      assert.equal(init.status, 200);
      const sid = init.headers.get('mcp-session-id');
      const call = async (args) => (await (await fetch(url, { method: 'POST', headers: { ...auth, 'Mcp-Session-Id': sid },
        body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'show_op', arguments: args } }) })).json()).result;
      assert.equal((await call({ op: 'e2e_scale' })).isError, false);
      const withPath = await call({ op: `${ctx.suite}/elementwise/e2e_scale` });
      assert.equal(withPath.isError, true);
      assert.match(withPath.content[0].text, /no file paths/);
      assert.equal((await call({ op: 'e2e_scale', suite: '/etc' })).isError, true);
    } finally {
      guarded.stop();
      remote.stop();
    }
  });
});

describe('kope mcp over raw stdio', () => {
  let project;
  before(async () => { project = await makeProject('raw'); });
  after(() => project?.cleanup());

  test('malformed requests get the standard error codes; stdout carries only protocol messages', async () => {
    const s = rawStdio(project);
    s.send('{"jsonrpc":"2.0",');
    assert.equal((await s.next()).error.code, -32700);
    s.send('{"jsonrpc":"2.0","id":1}');
    assert.equal((await s.next()).error.code, -32600);
    s.send('[{"jsonrpc":"2.0","id":2,"method":"ping"}]');
    assert.equal((await s.next()).error.code, -32600);
    s.send('{"jsonrpc":"2.0","id":3,"method":"no/such/method"}');
    const unknown = await s.next();
    assert.equal(unknown.id, 3);
    assert.equal(unknown.error.code, -32601);
    s.send('{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"eval_kernel","arguments":{"op":5}}}');
    assert.equal((await s.next()).error.code, -32602);
    s.send('{"jsonrpc":"2.0","id":5,"method":"ping"}');
    assert.deepEqual(await s.next(), { jsonrpc: '2.0', id: 5, result: {} });
    s.child.stdin.end();
    assert.equal((await s.exited).code, 0);
  });

  test('a client that leaves mid-evaluation: the evaluation is killed, the memory stays intact', LONG, async () => {
    // One case recorded first.
    const s = rawStdio(project);
    s.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } }));
    await s.next();
    s.send(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'record_attempt', arguments: { op: 'e2e_scale', source: kernels.correct, no_time: true } } }));
    const first = await s.next(600000);
    assert.equal(first.result.structuredContent.verdict, 'correct', JSON.stringify(first));
    // Then a slow one, and the client goes away while it is judged.
    s.send(JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'record_attempt', arguments: { op: 'e2e_scale', source: kernels.slow } } }));
    for (let i = 0; i < 600 && childrenOf(s.child.pid, ' eval ').length === 0; ++i) await sleep(100);
    assert.ok(childrenOf(s.child.pid, ' eval ').length > 0, 'the evaluation never started');
    await sleep(1000);
    const evaluation = childrenOf(s.child.pid, ' eval ').flatMap((p) => [p, ...descendantsOf(p)]);
    s.child.stdin.end();
    const exit = await s.exited;
    assert.equal(exit.code, 0, s.stderr());
    for (let i = 0; i < 50 && alive(evaluation).length > 0; ++i) await sleep(100);
    assert.deepEqual(alive(evaluation), [], 'processes of the abandoned evaluation are still running');
    const cases = spawnSync(kopeExe, ['memory', '--memory', project.memory, 'check', '--json'], { env: project.env, encoding: 'utf8' });
    assert.equal(cases.status, 0, cases.stderr + cases.stdout);
    const listed = spawnSync(kopeExe, ['memory', '--memory', project.memory, 'cases', '--json'], { env: project.env, encoding: 'utf8' });
    assert.equal(listed.status, 0, listed.stderr);
    const all = JSON.parse(listed.stdout);
    const list = Array.isArray(all) ? all : all.cases;
    assert.equal(list.length, 1, 'only the finished attempt is recorded');
  });
});
