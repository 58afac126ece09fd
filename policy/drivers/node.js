// airlock's session driver for javascript (see policy/drivers.go for the protocol).
//
// It runs in the sandbox as the program and is as untrusted as the code it runs: the
// server enforces every limit and decides every status from outside. The first process
// is the supervisor: it reads the session's key, says "ready", and starts the worker
// (this file again, with "worker"), again whenever it ends, saying "restart" each time.
// The worker runs each call as a script in its one global context; SIGINT interrupts a
// running script (breakOnSigint). A call's stdin is not available (node cannot swap its
// fd 0): the server refuses stdin for javascript sessions.
'use strict';
const fs = require('fs');

// The worker's exit status when the server has closed the session's stdin: the
// supervisor ends too.
const EOF = 199;

function mark(token, body) {
  const m = Buffer.from(token + body + '\n');
  for (const fd of [1, 2]) {
    try { fs.writeSync(fd, m); } catch (e) { /* the server ends the call either way */ }
  }
}

function readLine(fd) {
  const b = Buffer.alloc(1);
  let s = '';
  for (;;) {
    let n;
    try { n = fs.readSync(fd, b, 0, 1, null); } catch (e) { if (e.code === 'EAGAIN') continue; throw e; }
    if (n === 0) process.exit(0);
    if (b[0] === 10) return s;
    s += String.fromCharCode(b[0]);
  }
}

function supervisor() {
  const self = fs.readFileSync(__filename, 'utf8');
  try { fs.unlinkSync(__filename); } catch (e) { /* already gone */ }
  const token = '\x1eAIRLOCK-' + readLine(0).trim() + ':';
  const { spawnSync } = require('child_process');
  process.on('SIGINT', () => {});
  mark(token, 'ready:' + process.pid);
  for (;;) {
    const r = spawnSync(process.execPath, [...process.execArgv, '-e', self, '--', 'worker', token],
      { stdio: [0, 1, 2] });
    if (r.status === EOF) process.exit(0);
    if (r.signal) {
      const { constants } = require('os');
      mark(token, 'restart:signal:' + constants.signals[r.signal]);
    } else {
      mark(token, 'restart:exit:' + r.status);
    }
  }
}

function worker(token) {
  const vm = require('vm');
  globalThis.require = require;
  globalThis.module = module;
  process.on('SIGINT', () => {}); // only a running script is interrupted
  let buf = Buffer.alloc(0);
  let busy = false;
  const header = Buffer.from(token + 'call:');
  async function run(seq, code) {
    let rc = 0;
    try {
      const r = new vm.Script(code, { filename: 'session.js' }).runInThisContext({ breakOnSigint: true });
      if (r && typeof r.then === 'function') await r;
    } catch (e) {
      rc = e && e.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED' ? 130 : 1;
      try { console.error(e); } catch (e2) { /* nothing to tell */ }
    }
    if (typeof process.exitCode === 'number' && process.exitCode !== 0) {
      rc = process.exitCode & 0xff;
      process.exitCode = 0;
    }
    mark(token, 'end:' + seq + ':' + rc);
  }
  async function pump() {
    if (busy) return;
    busy = true;
    for (;;) {
      const nl = buf.indexOf(10);
      if (nl < 0) break;
      const line = buf.subarray(0, nl);
      if (!line.subarray(0, header.length).equals(header)) {
        buf = buf.subarray(nl + 1); // not a header: resynchronise on the next line
        continue;
      }
      const [seq, ncode, nin] = line.subarray(header.length).toString().split(':').map(Number);
      if (buf.length < nl + 1 + ncode + nin) break;
      const code = buf.subarray(nl + 1, nl + 1 + ncode).toString('utf8');
      buf = buf.subarray(nl + 1 + ncode + nin);
      await run(seq, code);
    }
    busy = false;
  }
  process.stdin.on('data', (d) => { buf = Buffer.concat([buf, d]); pump(); });
  mark(token, 'up');
  process.stdin.on('end', () => process.exit(EOF));
}

const wi = process.argv.indexOf('worker');
if (wi > 0 && process.argv[wi + 1] && process.argv[wi + 1].startsWith('\x1eAIRLOCK-')) {
  worker(process.argv[wi + 1]);
} else {
  supervisor();
}
