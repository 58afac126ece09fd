// airlock's warm-pool bootstrap for node, run as `node -e <this>`. It loads node before
// the call exists, then waits on fd 3 for the program's argv (main.js and its args, each
// NUL-terminated) and runs main.js as the main module, as `node main.js args...` would.
const fs = require('fs');
const path = require('path');
fs.writeSync(4, '\n'); // loaded: the pool may hand this sandbox a call
fs.closeSync(4);
const buf = fs.readFileSync(3);
fs.closeSync(3);
const argv = buf.toString('utf8').split('\0');
argv.pop();
process.argv = [process.argv[0], path.resolve(argv[0]), ...argv.slice(1)];
require('module').runMain();
