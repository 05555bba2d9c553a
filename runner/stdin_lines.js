// stdin_lines.js - the runner's stdin after its source: one JSON object a
// line (runner/PROTOCOL.md), split off the byte stream and each read into
// what the runner does with it. The build puts this file where runner.js
// has the line `// @insert stdin-lines` (scripts/gen-js.sh): declarations
// that use the runner's private references from around them (bufIndexOf,
// subarray, bufConcat, bufToString, parse: taken before any program code
// runs). tests/node/scan.test.mjs loads it the same way, with the same
// references, and holds it to PROTOCOL.md.
//
// lineReader(onLine, onBytes) gives the function that takes stdin's chunks
// and calls onLine(buf) for each line, without its newline, in order,
// however the chunks cut them. When onLine returns a count N > 0, the N
// bytes after that line's newline are not lines: they go to onBytes(bufs),
// once all have come, as the pieces stdin brought them in (a file chunk's
// data, newlines and all; not joined: a 256 KiB copy per chunk saved).
// readLine(buf, started) says what one line is:
//   before the hello (started false): {k:'warm', msg}, {k:'hello', msg},
//     or {k:'refuse'} for anything else, a line that is not JSON included
//     (the runner exits with code 2: codepod never sends such a line);
//   after it: {k:'res', msg} or {k:'err', msg} for an answer, {k:'in', msg}
//     for a command's stdin, {k:'ack', msg} or {k:'chunk', msg} for a file
//     operation (a chunk's msg.n, an integer from 0 to FILE_CHUNK_MAX, is
//     the count of its data bytes after the line), else null (ignored: not
//     JSON, not an answer, a second hello, a chunk without a valid n);
//   an empty line is null either way.

const HELLO_NONCE = /^[0-9a-f]{32}$/; // the frame header has room for this one only
const FILE_CHUNK_MAX = 262144; // runner/fileop.h, CODEPOD_FILE_CHUNK

function lineReader(onLine, onBytes) {
  let parts = [];
  let want = 0; // data bytes still to come after a line
  let have = 0; // of them, those in parts
  return function onData(chunk) {
    for (;;) {
      if (want > 0) {
        if (have + chunk.length < want) {
          if (chunk.length) { parts[parts.length] = chunk; have += chunk.length; }
          return;
        }
        const take = want - have;
        if (take) parts[parts.length] = subarray(chunk, 0, take);
        const data = parts;
        parts = [];
        want = have = 0;
        chunk = subarray(chunk, take);
        onBytes(data);
        continue;
      }
      const i = bufIndexOf(chunk, 10);
      if (i < 0) break;
      parts[parts.length] = subarray(chunk, 0, i);
      const whole = parts.length === 1 ? parts[0] : bufConcat(parts);
      parts = [];
      chunk = subarray(chunk, i + 1);
      const n = onLine(whole);
      if (n > 0) want = n;
    }
    if (chunk.length) parts[parts.length] = chunk;
  };
}

function readLine(buf, started) {
  if (buf.length === 0) return null;
  let msg;
  try { msg = parse(bufToString(buf, 'utf8')); } catch (_) { msg = undefined; }
  const k = msg !== null && typeof msg === 'object' ? msg.k : undefined;
  if (started && k === 'chunk') {
    const n = msg.n;
    return typeof n === 'number' && n >= 0 && n <= FILE_CHUNK_MAX && Math.floor(n) === n ? { k, msg } : null;
  }
  if (started) return k === 'res' || k === 'err' || k === 'in' || k === 'ack' ? { k, msg } : null;
  if (k === 'warm') return { k, msg };
  if (k === 'hello' && typeof msg.nonce === 'string' && HELLO_NONCE.test(msg.nonce)) return { k, msg };
  return { k: 'refuse' };
}
