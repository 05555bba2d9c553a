// Lets `node --test tests/node/` work on Node 22, which takes a directory
// argument as a module path (this file) rather than a folder to search.
for (const f of require('node:fs').readdirSync(__dirname).sort()) {
  if (f.endsWith('.test.mjs')) import(require('node:path').join(__dirname, f));
}
