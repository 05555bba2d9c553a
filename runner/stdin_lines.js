// stdin_lines.js - the runner's stdin after its source: one JSON object a
// line (runner/PROTOCOL.md), split off the byte stream and each read into
// what the runner does with it. The build puts this file where runner.js
// has the line `// @insert stdin-lines` (scripts/gen-js.sh): declarations
// that use the runner's private references from around them (bufIndexOf,
// subarray, bufConcat, bufToString, parse: taken before any program code
// runs). tests/node/scan.test.mjs loads it the same way, with the same
// references, and holds it to PROTOCOL.md.
//
// lineReader(onLine) gives the function that takes stdin's chunks and
// calls onLine(buf) for each line, without its newline, in order, however
// the chunks cut them. readLine(buf, started) says what one line is:
//   before the hello (started false): {k:'warm', msg}, {k:'hello', msg},
//     or {k:'refuse'} for anything else, a line that is not JSON included
//     (the runner exits with code 2: codepod never sends such a line);
//   after it: {k:'res', msg} or {k:'err', msg} for an answer, {k:'in', msg}
//     for a command's stdin, {k:'ack'|'chunk', msg} for a file operation, else null
//     (ignored: not JSON, not an answer, a second hello);
//   an empty line is null either way.

const HELLO_NONCE = /^[0-9a-f]{32}$/; // the frame header has room for this one only

function lineReader(onLine) {
  let parts = [];
  return function onData(chunk) {
    let i;
    while ((i = bufIndexOf(chunk, 10)) >= 0) {
      parts[parts.length] = subarray(chunk, 0, i);
      const whole = parts.length === 1 ? parts[0] : bufConcat(parts);
      parts = [];
      chunk = subarray(chunk, i + 1);
      onLine(whole);
    }
    if (chunk.length) parts[parts.length] = chunk;
  };
}

function readLine(buf, started) {
  if (buf.length === 0) return null;
  let msg;
  try { msg = parse(bufToString(buf, 'utf8')); } catch (_) { msg = undefined; }
  const k = msg !== null && typeof msg === 'object' ? msg.k : undefined;
  if (started) return k === 'res' || k === 'err' || k === 'in' || k === 'ack' || k === 'chunk' ? { k, msg } : null;
  if (k === 'warm') return { k, msg };
  if (k === 'hello' && typeof msg.nonce === 'string' && HELLO_NONCE.test(msg.nonce)) return { k, msg };
  return { k: 'refuse' };
}
