// What the MCP tests share: where kope is, a private project per test file (kope.toml naming the
// fake model server of tests/e2e, its own data and config directories), and `kope mcp` servers
// started over stdio or HTTP.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = path.dirname(fileURLToPath(import.meta.url));
export const sourceDir = process.env.KOPE_SOURCE_DIR ?? path.resolve(here, '../..');
export const kopeExe = process.env.KOPE_EXE ?? path.join(sourceDir, 'build/kope');
export const e2eOps = path.join(sourceDir, 'tests/e2e/ops');

// ctest treats this exit code as "skipped" (SKIP_RETURN_CODE in tests/mcp/CMakeLists.txt).
export const SKIP = 77;

// Exits with SKIP, saying why, when scripts/setup.sh has not installed the npm packages.
export function requireNodeModules() {
  const sdk = path.join(here, 'node_modules/@modelcontextprotocol/sdk/package.json');
  if (!fs.existsSync(sdk)) {
    console.log(`SKIP: ${path.join(here, 'node_modules')} is missing: run scripts/setup.sh (it runs \`npm ci\` in tests/mcp)`);
    process.exit(SKIP);
  }
  if (Number(process.versions.node.split('.')[0]) < 20) {
    console.error(`node ${process.version} is too old: the MCP SDK and the conformance suite need node 20 or newer (scripts/setup.sh installs it)`);
    process.exit(1);
  }
  if (!fs.existsSync(kopeExe)) {
    console.error(`kope is not built at ${kopeExe} (set KOPE_EXE)`);
    process.exit(1);
  }
}

// Loose timing keeps evaluations quick on a busy machine (as tests/e2e's k_quick).
export const quickEval = ['--eval-max-seconds', '0.5', '--eval-ci', '0.2'];

export const kernels = {
  correct: `#include <cstdint>
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  for (int64_t i = 0; i < N; ++i) y[i] = x[i] + x[i];
}
`,
  wrong: `#include <cstdint>
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  for (int64_t i = 0; i < N; ++i) y[i] = 3.0f * x[i];
}
`,
  broken: `extern "C" void kope_kernel(const float* x, float* y, long N) { this does not compile }
`,
  // Correct, but each call first runs a dependent chain of 1.5e9 multiply-adds (seconds; the
  // compiler cannot shorten it, and it calls no clock, which the evaluator rejects): an
  // evaluation long enough to cancel.
  slow: `#include <cstdint>
extern "C" void kope_kernel(const float* x, float* y, int64_t N) {
  uint64_t h = static_cast<uint64_t>(N) | 1;
  for (int64_t k = 0; k < 1500000000LL; ++k) h = h * 6364136223846793005ULL + 1442695040888963407ULL;
  const float extra = h == 42 ? 1.0f : 0.0f;
  for (int64_t i = 0; i < N; ++i) y[i] = 2.0f * x[i] + extra;
}
`,
};

// A private project: kope.toml naming the fake model server, config and data directories.
export async function makeProject(name) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `kope-mcp-${name}-`));
  fs.mkdirSync(path.join(dir, 'xdg'));
  fs.mkdirSync(path.join(dir, 'data'));
  const env = { ...process.env };
  for (const k of ['KOPE_MODEL', 'KOPE_PROFILE', 'OPENAI_BASE_URL', 'OPENAI_API_KEY', 'KOPE_MEMORY', 'KOPE_PROVIDER']) delete env[k];
  env.XDG_CONFIG_HOME = path.join(dir, 'xdg');
  env.KOPE_DATA_DIR = path.join(dir, 'data');
  return { dir, env, memory: path.join(dir, 'memory.db'), cleanup: () => fs.rmSync(dir, { recursive: true, force: true }) };
}

// tests/e2e/fake_llm_server.py on a free port, and the kope.toml that names it.
export async function startFakeModel(project) {
  const portFile = path.join(project.dir, 'fake-port');
  const child = spawn('python3', [path.join(sourceDir, 'tests/e2e/fake_llm_server.py'), '--fixtures',
    path.join(sourceDir, 'tests/e2e/fixtures'), '--port-file', portFile, '--log', path.join(project.dir, 'requests.jsonl')],
  { stdio: 'ignore' });
  for (let i = 0; i < 200 && !fs.existsSync(portFile); ++i) await sleep(50);
  const port = Number(fs.readFileSync(portFile, 'utf8'));
  fs.writeFileSync(path.join(project.dir, 'kope.toml'),
    `[llm.fake]\nbase_url = "http://127.0.0.1:${port}/v1"\nmodel = "fake-kernel-model"\napi_key_env = ""\n` +
    'context_window = 32000\nmax_output_tokens = 2000\nmax_retries = 1\n');
  return { stop: () => child.kill('SIGTERM') };
}

export function serverArgs(project, extra = []) {
  return ['mcp', '--suite', e2eOps, '--memory', project.memory, ...quickEval, ...extra];
}

// `kope mcp --http 127.0.0.1:0 ...`; resolves with its URL (from its first stderr line) and pid.
export function startHttpServer(project, extra = [], env = project.env, address = '127.0.0.1:0') {
  const child = spawn(kopeExe, serverArgs(project, ['--http', address, ...extra]), { cwd: project.dir, env, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    child.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/serving MCP \S+ on (http:\/\/\S+\/mcp)/);
      if (m) resolve({ url: m[1], pid: child.pid, child, log: () => log, stop: () => child.kill('SIGTERM') });
    });
    child.on('exit', (code) => reject(new Error(`kope mcp --http exited (${code}) before serving:\n${log}`)));
  });
}

export function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

// The pids of `pid`'s children whose command line contains `needle`.
export function childrenOf(pid, needle = '') {
  const out = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== pid) continue;
      const cmd = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ');
      if (cmd.includes(needle)) out.push(Number(entry));
    } catch { /* it ended meanwhile */ }
  }
  return out;
}

// Every descendant of `pid` (children, their children, ...).
export function descendantsOf(pid) {
  const out = [];
  for (const child of childrenOf(pid)) out.push(child, ...descendantsOf(child));
  return out;
}

export function alive(pids) {
  return pids.filter((p) => {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
    } catch { return false; }
  });
}

// A raw JSON-RPC conversation with `kope mcp` over stdio: send() writes a line, next() reads one.
export function rawStdio(project, extra = []) {
  const child = spawn(kopeExe, serverArgs(project, extra), { cwd: project.dir, env: project.env, stdio: ['pipe', 'pipe', 'pipe'] });
  let buffer = '';
  const lines = [];
  const waiters = [];
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d.toString(); });
  child.stdout.on('data', (d) => {
    buffer += d.toString();
    let nl;
    while ((nl = buffer.indexOf('\n')) >= 0) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      if (waiters.length) waiters.shift()(line); else lines.push(line);
    }
  });
  const exited = new Promise((r) => child.on('exit', (code, signal) => r({ code, signal })));
  return {
    child,
    exited,
    stderr: () => stderr,
    send: (text) => child.stdin.write(text.endsWith('\n') ? text : `${text}\n`),
    next: (timeoutMs = 60000) => new Promise((resolve, reject) => {
      if (lines.length) return resolve(JSON.parse(lines.shift()));
      const t = setTimeout(() => reject(new Error(`no reply within ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
      waiters.push((line) => { clearTimeout(t); resolve(JSON.parse(line)); });
    }),
  };
}
