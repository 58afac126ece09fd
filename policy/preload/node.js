// airlock's warm-pool bootstrap for node, run as `node -e <settings + this>`. It loads
// node and requires airlockPreload (the settings line in front, policy.nodeBoot) before
// the call exists, then waits on fd 3 for the program's argv (main.js and its args, each
// NUL-terminated) and runs main.js as the main module, as `node main.js args...` would.
const fs = require('fs');
const path = require('path');
// Open the stdio streams now, as nearly every program's first console.log would (~4 ms
// of a call otherwise). Node keeps pipe descriptors blocking either way.
process.stdout;
process.stderr;
for (const name of airlockPreload) require(name);
fs.writeSync(4, '\n'); // loaded: the pool may hand this sandbox a call
fs.closeSync(4);
const buf = fs.readFileSync(3);
fs.closeSync(3);
const argv = buf.toString('utf8').split('\0');
argv.pop();
process.argv = [process.argv[0], path.resolve(argv[0]), ...argv.slice(1)];
// `node main.js` has no -e: drop it and this source from what the program can see.
process.execArgv = process.execArgv.slice(0, -2);
delete process._eval;
// Once every 'exit' listener has run, end the process the way process.exit() does,
// skipping the teardown of a natural exit (~4 ms of freeing the isolate): nothing
// survives the sandbox, and nothing of the program can run or be observed after its
// 'exit' listeners. The exit code is node's own: process.exitCode if set, even by a
// listener, else the code the event carried. Not after an uncaught exception (an
// 'uncaughtException' nobody handled): node prints it only after 'exit'.
const emit = process.emit;
let fatal = false;
process.emit = function (event, ...args) {
  const handled = emit.call(this, event, ...args);
  if (event === 'uncaughtException' && !handled) {
    fatal = true;
  } else if (event === 'exit' && !fatal) {
    process.reallyExit(process.exitCode ?? args[0] ?? 0);
  }
  return handled;
};
require('module').runMain();
