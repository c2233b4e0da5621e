'use strict';
// Runs a batch of commands in a CreateOS sandbox for the sandbox-plugin
// worker. Stdin: {"c":[{"s":script,"in":stdin or null,"t":ms or 0}]}.
// Each command runs as /bin/bash -lc script in its own process group, at
// the same time as the others, with its own stdin; t > 0 kills its group
// after t ms. Stdout: one JSON object a line, written by this process
// alone: {"hello":1} before any command starts, then per command i
// {"i":i,"p":pid}, {"i":i,"o":base64} and {"i":i,"e":base64} as its stdout
// and stderr arrive, and last {"i":i,"x":code} (a signal n is 128+n, with
// "t":1 when its time ran out) or {"i":i,"err":text} when it could not
// start. Written for any Node.js from version 12.
var cp = require('child_process');
var os = require('os');

function emit(o) { process.stdout.write(JSON.stringify(o) + '\n'); }

var groups = {};
function killAll() {
  Object.keys(groups).forEach(function (pid) {
    try { process.kill(-Number(pid), 'SIGKILL'); } catch (e) { /* gone */ }
  });
}
['SIGTERM', 'SIGHUP', 'SIGINT'].forEach(function (s) {
  process.on(s, function () { killAll(); process.exit(128 + os.constants.signals[s]); });
});
process.stdout.on('error', function () { killAll(); process.exit(1); });

function run(c, i) {
  var ended = false;
  var timedOut = false;
  var timer = null;
  var child;
  function end(o) {
    if (ended) return;
    ended = true;
    if (timer) clearTimeout(timer);
    if (child && child.pid) delete groups[child.pid];
    o.i = i;
    emit(o);
  }
  try {
    child = cp.spawn('/bin/bash', ['-lc', c.s], { detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    end({ err: String(e && e.code || e) });
    return;
  }
  child.on('error', function (e) { end({ err: String(e && e.code || e) }); });
  if (!child.pid) return;
  groups[child.pid] = true;
  emit({ i: i, p: child.pid });
  child.stdout.on('data', function (b) { if (!ended) emit({ i: i, o: b.toString('base64') }); });
  child.stderr.on('data', function (b) { if (!ended) emit({ i: i, e: b.toString('base64') }); });
  child.stdin.on('error', function () { /* the command did not read its stdin */ });
  child.stdin.end(typeof c.in === 'string' ? c.in : undefined);
  if (c.t > 0) {
    // Node runs a timer longer than 2^31-1 ms after 1 ms instead.
    timer = setTimeout(function () {
      timedOut = true;
      try { process.kill(-child.pid, 'SIGKILL'); } catch (e) { /* gone */ }
    }, Math.min(c.t, 2147483647));
  }
  var exited = null;
  function finish() {
    var o = { x: exited.code === null ? 128 + (os.constants.signals[exited.signal] || 0) : exited.code };
    if (timedOut) o.t = 1;
    end(o);
  }
  // A command is over when it exits and its output is read; output still
  // held open a second after its exit (by something it left running) is
  // not waited for.
  child.on('exit', function (code, signal) {
    exited = { code: code, signal: signal };
    setTimeout(function () {
      child.stdout.destroy();
      child.stderr.destroy();
      finish();
    }, 1000).unref();
  });
  child.on('close', function (code, signal) {
    if (!exited) exited = { code: code, signal: signal };
    finish();
  });
}

var raw = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', function (d) { raw += d; });
process.stdin.on('end', function () {
  var spec = JSON.parse(raw);
  emit({ hello: 1 });
  (spec.c || []).forEach(run);
});
