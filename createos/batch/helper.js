'use strict';
// The batch helper of the sandbox-plugin's createos driver. One streaming
// exec runs it (node -e, no shell) to run several commands of a sandbox side
// by side. Stdin: a JSON header line {"n":nonce,"d":dir,"l":launch,
// "r":reaper,"c":[{"b":bytes,"t":ms}]}, then each command's data, c[i].b
// bytes each. Command i runs as /bin/bash -lc launch in a session of its own,
// its data on stdin, under its own subreaper (perl -e reaper) where perl can
// be one. Stdout: one frame a line, "<nonce> <json>": {"h":1}; {"i":i,"p":pid}
// (the command's process, or its subreaper's);
// {"i":i,"o"|"e":base64}; {"i":i,"x":code} (+"t":1 timed out, "c":1
// cancelled, "k":n survivors) or {"i":i,"err":text}; {"z":1} last. The file
// <dir>/<i> asks to end command i. Runs on Node.js 12 or later (ES2017).
var cp = require('child_process');
var fs = require('fs');
var os = require('os');

var TICK = 50; // ms between scans of /proc and looks for cancel files
var ROUND = 10; // ms between two rounds of ending a tree
var ROUNDS = 200; // rounds before what still lives is reported as survivors
var STOP_ROUNDS = 10; // rounds of SIGSTOP before SIGKILL, at most
var DRAIN = 1000; // ms a command's pipes may stay open after its exit
var MAX_TIMER = 2147483647; // Node fires a longer timer after 1 ms instead

var nonce = '';
var dir = '';
var dirMade = false;
var cmds = [];
var ticker = null;
var closing = false; // bye is written: no other frame follows it
var dying = false; // a signal or a broken stdout: the helper is going
var backlog = false;
var outputs = []; // every command's stdout and stderr
var reaper = null; // perl's arguments before a command's own, where it runs under a subreaper

function frame(o) {
  if (closing || dying) return;
  // Node makes its stdout pipe non-blocking: a write to a full pipe is
  // queued. The commands' output waits while it is, so the queue stays one
  // read of each command.
  if (!process.stdout.write(nonce + ' ' + JSON.stringify(o) + '\n') && !backlog) {
    backlog = true;
    outputs.forEach(function (s) { s.pause(); });
    process.stdout.once('drain', function () {
      backlog = false;
      outputs.forEach(function (s) { s.resume(); });
    });
  }
}

function signal(pid, sig) {
  try { process.kill(pid, sig); } catch (e) { /* gone, or not ours to signal */ }
}

// stat reads a process's state, parent, group, session and start time. The
// fields are taken after the last ')': a command's name may hold any.
function stat(pid) {
  var s;
  try { s = fs.readFileSync('/proc/' + pid + '/stat', 'latin1'); } catch (e) { return null; }
  var f = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { pid: pid, state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), sid: Number(f[3]), start: f[19] };
}

// scan reads every process of the sandbox.
function scan() {
  var procs = new Map();
  var names = [];
  try { names = fs.readdirSync('/proc'); } catch (e) { /* no /proc: only groups get killed */ }
  names.forEach(function (name) {
    var p = /^[0-9]+$/.test(name) && stat(Number(name));
    if (p) procs.set(p.pid, p);
  });
  return procs;
}

// members grows command c's tracked set from procs and returns its live
// members: its leader (its subreaper, when it has one), the leader's session
// and group, and every child of a member. Under a subreaper, whatever the
// command orphans is the subreaper's child; without one, tracking keeps a
// process whose parent died and that left the session (setsid) once a scan
// saw it linked. A fixpoint, not one pass in start order: a child may start
// in the same clock tick as its parent.
function members(c, procs) {
  var t = c.tracked;
  t.forEach(function (start, pid) {
    var p = procs.get(pid);
    if (!p || p.start !== start || p.state === 'Z') t.delete(pid);
  });
  // Once the leader is reaped its pid may be reused; the kernel keeps it
  // while a process of its session or group lives, so a different start
  // time means nothing is left in them.
  var l = procs.get(c.pid);
  var byLeader = !l || l.start === c.start;
  var grew = true;
  while (grew) {
    grew = false;
    procs.forEach(function (p) {
      if (p.state === 'Z' || t.has(p.pid) || p.pid === process.pid) return;
      var linked = t.has(p.ppid) ||
        byLeader && (p.pid === c.pid || p.sid === c.pid || p.pgrp === c.pid);
      if (linked) { t.set(p.pid, p.start); grew = true; }
    });
  }
  var live = [];
  t.forEach(function (start, pid) { live.push(procs.get(pid)); });
  return live;
}

// strike sends sig to each live member of c's tree, and to its group at
// once, so a member forked since the scan that is still in the group gets
// it too.
function strike(c, live, sig) {
  live.forEach(function (p) { signal(p.pid, sig); });
  if (live.some(function (p) { return p.pgrp === c.pid; })) signal(-c.pid, sig);
}

function stopped(p) { return p.state === 'T' || p.state === 't'; }

// end ends command c's whole tree, for reason 't' (its time ran out) or 'c'
// (a cancel file). It first stops every member: a stopped process cannot
// fork, so the tree stops growing and every child keeps its parent's link;
// then it kills them, round after round, until none is alive.
function end(c, reason) {
  if (!c.pid || c.reason || c.exit || c.answered) return;
  c.reason = reason;
  c.killing = true;
  clearTimeout(c.timer);
  var rounds = 0;
  var sig = 'SIGSTOP';
  (function round() {
    var live = members(c, scan());
    if (sig === 'SIGSTOP' && (rounds >= STOP_ROUNDS || live.every(stopped))) sig = 'SIGKILL';
    if (sig === 'SIGKILL' && live.length === 0 || rounds >= ROUNDS) {
      c.survivors = live.length;
      c.killing = false;
      settle(c);
      return;
    }
    strike(c, live, sig);
    rounds++;
    setTimeout(round, ROUND);
  })();
}

// settle answers c once its leader's exit is known, its pipes are done and
// no kill of its tree is under way.
function settle(c) {
  if (c.answered || !c.exit || !c.closed || c.killing) return;
  var x = c.exit.code !== null ? c.exit.code : 128 + (os.constants.signals[c.exit.signal] || 0);
  var o = { i: c.i, x: x };
  if (c.reason) o[c.reason] = 1;
  if (c.survivors) o.k = c.survivors;
  answer(c, o);
}

function answer(c, o) {
  c.answered = true;
  clearTimeout(c.timer);
  frame(o);
  if (cmds.every(function (d) { return d.answered; })) finish();
}

// subreaper is the arguments that run a command under the reaper program
// (perl -e reaper -- argv), or null where perl cannot make it a subreaper.
// Under it, what a command orphans comes to its subreaper, a member of its
// tree, instead of the sandbox's init: end() ends it with the rest.
function subreaper(prog) {
  if (!prog) return null;
  var r = cp.spawnSync('perl', ['-e', prog], { stdio: 'ignore', env: process.env, timeout: 5000 });
  return r.status === 0 ? ['-e', prog, '--'] : null;
}

function run(c, launch, data) {
  var child;
  var argv = ['/bin/bash', '-lc', launch];
  if (reaper) argv = ['perl'].concat(reaper, argv);
  try {
    child = cp.spawn(argv[0], argv.slice(1), { detached: true, stdio: ['pipe', 'pipe', 'pipe'], env: process.env });
  } catch (e) {
    answer(c, { i: c.i, err: String(e && e.message || e) });
    return;
  }
  child.on('error', function (e) {
    // Without a pid it never started; with one, exit and close still come.
    if (!c.pid) answer(c, { i: c.i, err: String(e && e.message || e) });
  });
  if (!child.pid) return;
  c.pid = child.pid;
  c.start = (stat(c.pid) || {}).start;
  frame({ i: c.i, p: c.pid });
  child.stdin.on('error', function () { /* the command did not read all its stdin */ });
  child.stdin.end(data);
  child.stdout.on('data', function (b) { if (!c.answered) frame({ i: c.i, o: b.toString('base64') }); });
  child.stderr.on('data', function (b) { if (!c.answered) frame({ i: c.i, e: b.toString('base64') }); });
  outputs.push(child.stdout, child.stderr);
  if (backlog) { child.stdout.pause(); child.stderr.pause(); }
  if (c.t > 0) c.timer = setTimeout(function () { end(c, 't'); }, Math.min(c.t, MAX_TIMER));
  child.on('exit', function (code, sig) {
    c.exit = { code: code, signal: sig };
    // What a command that exited by itself left running is not ours to
    // kill: the provider leaves it alone too.
    if (!c.reason) { c.tracked.clear(); clearTimeout(c.timer); }
    // A job it left running may hold its pipes open; it keeps running. No
    // second is counted while output waits for the helper's own stdout.
    setTimeout(function drained() {
      if (backlog) { setTimeout(drained, DRAIN); return; }
      child.stdout.destroy();
      child.stderr.destroy();
      c.closed = true;
      settle(c);
    }, DRAIN);
  });
  child.on('close', function () { c.closed = true; settle(c); });
}

// pollCancels takes the cancel files: each is removed once seen.
function pollCancels() {
  if (!dirMade) return;
  var names = [];
  try { names = fs.readdirSync(dir); } catch (e) { return; }
  names.forEach(function (name) {
    try { fs.unlinkSync(dir + '/' + name); } catch (e) { /* already gone */ }
    if (/^(0|[1-9][0-9]*)$/.test(name) && Number(name) < cmds.length) end(cmds[Number(name)], 'c');
  });
}

function tick() {
  pollCancels();
  var running = cmds.filter(function (c) { return c.pid && !c.exit && !c.killing; });
  if (running.length === 0) return;
  var procs = scan();
  running.forEach(function (c) { members(c, procs); });
}

function removeDir() {
  if (!dirMade) return;
  // A cancel file may land between the unlinks and the rmdir: try again.
  for (var k = 0; k < 5; k++) {
    try {
      fs.readdirSync(dir).forEach(function (name) { fs.unlinkSync(dir + '/' + name); });
      fs.rmdirSync(dir);
      dirMade = false;
      return;
    } catch (e) { /* retry */ }
  }
}

function finish() {
  clearInterval(ticker);
  removeDir();
  if (closing || dying) return;
  closing = true;
  // Exit once every frame, bye last, has left for the pipe: an exit drops
  // what is queued.
  process.stdout.write(nonce + ' ' + JSON.stringify({ z: 1 }) + '\n', function (err) { process.exit(err ? 1 : 0); });
}

// die ends the trees of the commands still running before the helper goes:
// synchronously, since it is about to exit.
function die(code) {
  if (dying) return;
  dying = true;
  clearInterval(ticker);
  var left = cmds.filter(function (c) { return c.pid && !c.answered && (!c.exit || c.reason); });
  var pause = new Int32Array(new SharedArrayBuffer(4));
  for (var r = 0; r < 20 && left.length > 0; r++) {
    var procs = scan();
    var sig = r < 3 ? 'SIGSTOP' : 'SIGKILL';
    left = left.filter(function (c) {
      var live = members(c, procs);
      strike(c, live, sig);
      return live.length > 0 || sig === 'SIGSTOP';
    });
    if (left.length > 0) Atomics.wait(pause, 0, 0, ROUND);
  }
  removeDir();
  process.exit(code);
}

['SIGTERM', 'SIGHUP', 'SIGINT'].forEach(function (s) {
  process.on(s, function () { die(128 + os.constants.signals[s]); });
});
process.stdout.on('error', function () { die(1); });

function valid(h) {
  return h && typeof h.n === 'string' && h.n !== '' && typeof h.d === 'string' && typeof h.l === 'string' &&
    (h.r === undefined || typeof h.r === 'string') &&
    Array.isArray(h.c) && h.c.every(function (c) {
      return c && Number.isSafeInteger(c.b) && c.b >= 0 && typeof c.t === 'number' && c.t >= 0;
    });
}

function start(buf) {
  var nl = buf.indexOf(10);
  var h = null;
  try { h = JSON.parse(buf.slice(0, nl < 0 ? buf.length : nl).toString('utf8')); } catch (e) { /* below */ }
  if (nl < 0 || !valid(h)) {
    process.stderr.write('batch helper: stdin does not start with a header line\n');
    process.exit(2);
  }
  nonce = h.n;
  dir = h.d;
  try { fs.mkdirSync(dir, 0o700); dirMade = true; } catch (e) { /* cancel requests will not be seen */ }
  cmds = h.c.map(function (c, i) { return { i: i, t: c.t, tracked: new Map() }; });
  frame({ h: 1 });
  if (cmds.length === 0) { finish(); return; }
  var off = nl + 1;
  var want = h.c.reduce(function (n, c) { return n + c.b; }, 0);
  if (buf.length - off !== want) {
    // The data was changed on its way (bytes that were not UTF-8?): no
    // command gets another's.
    var why = 'the helper read ' + (buf.length - off) + ' bytes of command data, its header says ' + want;
    cmds.forEach(function (c) { answer(c, { i: c.i, err: why }); });
    return;
  }
  reaper = subreaper(h.r);
  ticker = setInterval(tick, TICK);
  cmds.forEach(function (c, i) {
    run(c, h.l, buf.slice(off, off + h.c[i].b));
    off += h.c[i].b;
  });
}

var chunks = [];
process.stdin.on('data', function (b) { chunks.push(b); });
process.stdin.on('end', function () { start(Buffer.concat(chunks)); });
