// codepod runner bootstrap (on the command line: keep it tiny). Reads "<len>\n<runner.js>"
// from stdin and calls it as function(require, leftover). The block keeps its names private.
{let b=Buffer.alloc(0),n=-1;const s=process.stdin;s.on('data',function d(c){b=Buffer.concat([b,c]);if(n<0){const i=b.indexOf(10);if(i<0)return;n=+b.subarray(0,i);b=b.subarray(i+1)}if(b.length<n)return;s.off('data',d);const r=b.subarray(0,n)+'',l=b.subarray(n);b=null;require('vm').runInThisContext(r,{filename:'codepod-runner.js'})(require,l)})}
