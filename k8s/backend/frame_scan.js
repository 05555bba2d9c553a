// frame_scan.js - the supervisor's reading of one runner's streams, to see
// its end go by (k8s/backend/supervisor.js says why): the nonce off the
// hello on the runner's stdin, then its frames on stdout, found by the
// rules of runner/frame.h. The build puts this file where supervisor.js has
// the line `// @insert frame-scan` (scripts/gen-js.sh): declarations that
// use FRAME_KINDS and FINAL_KINDS (the frame kinds, inserted before it) and
// Buffer. tests/node/scan.test.mjs loads it the same way, with the same
// frame kinds, and holds it to those rules.
//
// newScan() is one channel's state. watchIn(s, b) reads the channel's stdin
// bytes while s.inPhase < 3: "<len>\n", the runner source, any warm lines,
// the hello's first 64 bytes; then s.head is the runner's frame header up
// to its kind, or stays null (nothing to watch). watchOut(s, b) reads its
// stdout bytes and returns true once: when the runner's first final frame
// (FINAL_KINDS) has gone by whole.

const SCAN_EMPTY = Buffer.alloc(0);
const HELLO = /^\{"k":"hello","nonce":"([0-9a-f]{32})"/;
// A header after its nonce: frame.h takes up to 20 digits, leading zeros
// too, and so must this, or a frame's payload would be read as output.
const KIND_LEN = new RegExp('^([' + FRAME_KINDS + ']) (\\d{1,20})$');

function newScan() {
  return { inPhase: 0, inText: '', inSkip: 0, head: null, // watchIn
           outHold: SCAN_EMPTY, outSkip: 0, outFinal: false, ended: false }; // watchOut
}

function watchIn(s, b) {
  for (let i = 0; i < b.length && s.inPhase < 3;) {
    if (s.inPhase === 0) { // "<len>\n" of the runner's source
      const ch = b[i++];
      if (ch === 10) { s.inSkip = +s.inText; s.inText = ''; s.inPhase = s.inSkip >= 0 ? 1 : 3; }
      else if (ch >= 48 && ch <= 57 && s.inText.length < 12) s.inText += String.fromCharCode(ch);
      else s.inPhase = 3;
    } else if (s.inPhase === 1) {
      const take = Math.min(s.inSkip, b.length - i);
      i += take;
      s.inSkip -= take;
      if (s.inSkip === 0) s.inPhase = 2;
    } else { // a line's first bytes: warm lines, then the hello
      const nl = b.indexOf(10, i);
      const want = 64 - s.inText.length;
      const end = nl >= 0 && nl - i < want ? nl + 1 : Math.min(b.length, i + want);
      s.inText += b.toString('latin1', i, end);
      i = end;
      if (s.inText.length >= 64 || s.inText.endsWith('\n')) {
        const m = HELLO.exec(s.inText);
        if (m) s.head = Buffer.from('\x1ecp1 ' + m[1] + ' ', 'latin1');
        // A runner started ahead may get a warm line before its hello
        // (runner/PROTOCOL.md): the hello is the next line.
        if (m || s.inText.length >= 64 || !isWarm(s.inText)) s.inPhase = 3;
        s.inText = '';
      }
    }
  }
}

function isWarm(line) {
  try {
    const v = JSON.parse(line);
    return v !== null && typeof v === 'object' && v.k === 'warm';
  } catch (_) {
    return false;
  }
}

function watchOut(s, b) {
  if (!s.head || s.ended) return false;
  let d = s.outHold.length ? Buffer.concat([s.outHold, b]) : b;
  s.outHold = SCAN_EMPTY;
  for (let i = 0; i < d.length;) {
    if (s.outSkip > 0) {
      const take = Math.min(s.outSkip, d.length - i);
      i += take;
      s.outSkip -= take;
      if (s.outSkip === 0 && s.outFinal) return (s.ended = true);
      continue;
    }
    const j = d.indexOf(0x1e, i);
    if (j < 0) return false;
    const nl = d.indexOf(10, j);
    if (nl < 0 || nl - j > 64) {
      if (nl < 0 && d.length - j <= 64) s.outHold = Buffer.from(d.subarray(j));
      i = nl < 0 && d.length - j <= 64 ? d.length : j + 1;
      continue;
    }
    const h = s.head.length;
    const m = nl - j > h && d.compare(s.head, 0, h, j, j + h) === 0 &&
      KIND_LEN.exec(d.toString('latin1', j + h, nl));
    if (!m) { i = j + 1; continue; }
    i = nl + 1;
    s.outSkip = +m[2];
    s.outFinal = FINAL_KINDS.includes(m[1]);
    if (s.outFinal && s.outSkip === 0) return (s.ended = true);
  }
  return false;
}
