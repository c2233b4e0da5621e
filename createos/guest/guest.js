// The sandbox-plugin's createos driver runs this one program inside a
// sandbox, as node -e <program> <subcommand> <args>. The Go side
// (createos/guest) puts "use strict" and the object GO, the constants both
// sides share, before this text.
//
//   batch                               run the commands stdin describes side by side
//   reap   <dir> <leader pid>...        end what a dead batch left of its commands
//   apply  <stream> <out> <workspace>   rebuild a file from a sync stream
//   index  <out> <workspace>            list the sandbox store's hashes (32 bytes each)
//   recipe <tar|file> <src> <out> <workspace>
//                                       describe src by reference (+ <out>.idx)
//   pack   <src> <idx> <want> <out>     the contents of src named in want
//
// batch and reap run on Node.js 12 or later; the sync subcommands need
// 14.17. One tree killer (Tree, Ending) ends what a command started: for a
// batch command's timeout or cancel, for the batch's own end on a signal,
// and for reap.
const cp = require("child_process");
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");
const crypto = require("crypto");

class Exit extends Error {
  constructor(code, msg) { super(msg); this.code = code; }
}

function signal(pid, sig) {
  try { process.kill(pid, sig); } catch (e) { /* gone, or not ours to signal */ }
}

// ---- The process table and the tree killer ----

const ROUND_MS = 10; // between two rounds of ending trees
const ROUNDS = 200; // rounds before what still lives is counted as survivors
const STOP_ROUNDS = 10; // rounds of SIGSTOP before SIGKILL, at most

// stat reads a process's state, parent, group, session and start time. The
// fields are taken after the last ")": a command's name may hold any.
function stat(pid) {
  let s;
  try { s = fs.readFileSync("/proc/" + pid + "/stat", "latin1"); } catch (e) { return null; }
  const f = s.slice(s.lastIndexOf(")") + 2).split(" ");
  return { pid, state: f[0], ppid: Number(f[1]), pgrp: Number(f[2]), sid: Number(f[3]), start: f[19] };
}

// scan reads every process of the sandbox.
function scan() {
  const procs = new Map();
  let names = [];
  try { names = fs.readdirSync("/proc"); } catch (e) { /* no /proc: only groups get signalled */ }
  for (const name of names) {
    const p = /^[0-9]+$/.test(name) && stat(Number(name));
    if (p) procs.set(p.pid, p);
  }
  return procs;
}

const stopped = (p) => p.state === "T" || p.state === "t";

// Tree is what one or more leaders started: each leader, every process of
// its session or group, and every child of a member, tracked from scan to
// scan so a process whose parent died and that left the session stays a
// member once a scan saw it linked. Nothing of this program's own session
// is a member. A leader is {pid, start}: once it is reaped its pid may be
// reused, and the kernel keeps it while a process of its session or group
// lives, so a different start time means nothing is left in them (start
// undefined: not checked).
class Tree {
  constructor(leaders) { this.leaders = leaders; this.tracked = new Map(); this.own = (stat(process.pid) || {}).sid; }

  // members grows the tracked set from procs and returns its live members.
  // A fixpoint, not one pass in start order: a child may start in the
  // same clock tick as its parent.
  members(procs) {
    const t = this.tracked;
    t.forEach((start, pid) => {
      const p = procs.get(pid);
      if (!p || p.start !== start || p.state === "Z") t.delete(pid);
    });
    const lead = this.leaders.filter((l) => {
      const p = procs.get(l.pid);
      return !p || l.start === undefined || p.start === l.start;
    }).map((l) => l.pid);
    for (let grew = true; grew;) {
      grew = false;
      procs.forEach((p) => {
        if (p.state === "Z" || t.has(p.pid) || p.sid === this.own || p.pid === process.pid) return;
        if (t.has(p.ppid) || lead.includes(p.pid) || lead.includes(p.sid) || lead.includes(p.pgrp)) {
          t.set(p.pid, p.start);
          grew = true;
        }
      });
    }
    const live = [];
    t.forEach((start, pid) => live.push(procs.get(pid)));
    return live;
  }

  // strike sends sig to each live member, and to each leader's group that
  // still has one, so a member forked since the scan gets it too.
  strike(live, sig) {
    live.forEach((p) => signal(p.pid, sig));
    for (const l of this.leaders) if (live.some((p) => p.pgrp === l.pid)) signal(-l.pid, sig);
  }
}

// Ending ends trees, round after round: it first stops every member (a
// stopped process cannot fork, so the trees stop growing and every child
// keeps its parent's link), then kills them until a round finds none.
class Ending {
  constructor(trees, rounds) { this.trees = trees; this.limit = rounds; this.rounds = 0; this.sig = "SIGSTOP"; }

  // round runs one round: null while the ending goes on, else how many
  // processes survived it.
  round() {
    const procs = scan();
    const live = this.trees.map((t) => t.members(procs));
    const all = [].concat(...live);
    if (this.sig === "SIGSTOP" && (this.rounds >= STOP_ROUNDS || all.every(stopped))) this.sig = "SIGKILL";
    if ((this.sig === "SIGKILL" && all.length === 0) || this.rounds >= this.limit) return all.length;
    this.trees.forEach((t, i) => t.strike(live[i], this.sig));
    this.rounds++;
    return null;
  }

  // now ends the trees before it returns the survivors.
  now() {
    const pause = new Int32Array(new SharedArrayBuffer(4));
    for (;;) {
      const n = this.round();
      if (n !== null) return n;
      Atomics.wait(pause, 0, 0, ROUND_MS);
    }
  }

  // later ends the trees between other work, then calls done(survivors).
  later(done) {
    const n = this.round();
    if (n !== null) done(n);
    else setTimeout(() => this.later(done), ROUND_MS);
  }
}

// ---- batch ----
//
// Stdin: a JSON header line {"n":nonce,"d":dir,"l":launch,"c":[{"b":bytes,
// "t":ms}]}, then each command's data, c[i].b bytes each. Command i runs as
// /bin/bash -lc launch in a session of its own, its data on stdin, under a
// subreaper of its own (perl -e REAPER) where perl can make one. Stdout:
// one frame a line, "<nonce> <json>": {"h":1}; {"i":i,"p":pid} (the
// command's process, or its subreaper's); {"i":i,"o"|"e":base64};
// {"i":i,"x":code} (+"t":1 timed out, "c":1 cancelled, "k":n survivors) or
// {"i":i,"err":text}; {"z":1} last. The file <dir>/<i> asks to end command
// i.

const TICK_MS = 50; // between scans of /proc and looks for cancel files
const DRAIN_MS = 1000; // a command's pipes may stay open this long after its exit
const DIE_ROUNDS = 20; // rounds of ending trees when the batch itself is ended
const MAX_TIMER = 2147483647; // Node fires a longer timer after 1 ms instead

// REAPER is the subreaper of one command. Alone, a command runs under the
// provider's supervisor, a child subreaper: what the command orphans (a
// double fork, setsid -f, daemon(3)) stays in its tree while it runs, and
// ends with it. Node cannot make itself one, and no mark that survives
// setsid and exec can be read from /proc without the command seeing it
// (a variable would change its environment), so each command runs under
// this perl: it becomes a child subreaper (PR_SET_CHILD_SUBREAPER: kept
// across exec, not given to children), starts the command (its arguments)
// in a session of its own, reaps whatever comes to it, and exits with the
// command's status (128+n for signal n) as soon as the command has exited,
// leaving what it left running, as the supervisor does. Without arguments
// it only says (exit 0) whether it can be one here. Perl's core only,
// without POSIX: it starts in a few milliseconds. SYS_prctl and SYS_setsid
// by architecture (x32 has numbers of its own); 36 is PR_SET_CHILD_SUBREAPER.
const REAPER = String.raw`use strict;
use Config;
my %nr = ('x86_64-linux' => [157, 112], 'aarch64-linux' => [167, 157]);
my ($prctl, $setsid) = @{ $nr{ $Config{archname} =~ /^(\w+-linux)(?!-gnux32)/ ? $1 : '' } || [] };
my $subreaper = $prctl && syscall($prctl, 36, 1, 0, 0, 0) == 0;
exit($subreaper ? 0 : 1) unless @ARGV;
my $pid = $subreaper ? fork : undef;
if (!$pid) {
	syscall($setsid) if defined $pid;
	exec { $ARGV[0] } @ARGV or print STDERR "$ARGV[0]: $!\n";
	exit 127;
}
close STDIN;
close STDOUT;
close STDERR;
$SIG{$_} = 'IGNORE' for qw(HUP INT QUIT TERM PIPE ALRM USR1 USR2);
my $w;
do { $w = waitpid(-1, 0) } until $w == $pid || $w < 0;
exit(($? & 127) ? 128 + ($? & 127) : $? >> 8);
`;

// Batch is one run of the batch subcommand.
class Batch {
  constructor() {
    this.nonce = ""; this.dir = ""; this.dirMade = false; this.cmds = [];
    this.ticker = null;
    this.closing = false; // bye is written: no other frame follows it
    this.dying = false; // a signal or a broken stdout: the program is going
    this.backlog = false;
    this.outputs = []; // every command's stdout and stderr
    this.reaper = null; // perl's arguments before a command's own, where it runs under a subreaper
  }

  frame(o) {
    if (this.closing || this.dying) return;
    // Node makes its stdout pipe non-blocking: a write to a full pipe is
    // queued. The commands' output waits while it is, so the queue stays
    // one read of each command.
    if (!process.stdout.write(this.nonce + " " + JSON.stringify(o) + "\n") && !this.backlog) {
      this.backlog = true;
      this.outputs.forEach((s) => s.pause());
      process.stdout.once("drain", () => {
        this.backlog = false;
        this.outputs.forEach((s) => s.resume());
      });
    }
  }

  // end ends command c's whole tree, for reason "t" (its time ran out) or
  // "c" (a cancel file).
  end(c, reason) {
    if (!c.pid || c.reason || c.exit || c.answered) return;
    c.reason = reason;
    c.killing = true;
    clearTimeout(c.timer);
    new Ending([c.tree], ROUNDS).later((survivors) => {
      c.survivors = survivors;
      c.killing = false;
      this.settle(c);
    });
  }

  // settle answers c once its leader's exit is known, its pipes are done
  // and no ending of its tree is under way.
  settle(c) {
    if (c.answered || !c.exit || !c.closed || c.killing) return;
    const x = c.exit.code !== null ? c.exit.code : 128 + (os.constants.signals[c.exit.signal] || 0);
    const o = { i: c.i, x };
    if (c.reason) o[c.reason] = 1;
    if (c.survivors) o.k = c.survivors;
    this.answer(c, o);
  }

  answer(c, o) {
    c.answered = true;
    clearTimeout(c.timer);
    this.frame(o);
    if (this.cmds.every((d) => d.answered)) this.finish();
  }

  run(c, launch, data) {
    let child;
    let argv = ["/bin/bash", "-lc", launch];
    if (this.reaper) argv = ["perl"].concat(this.reaper, argv);
    try {
      child = cp.spawn(argv[0], argv.slice(1), { detached: true, stdio: ["pipe", "pipe", "pipe"], env: process.env });
    } catch (e) {
      this.answer(c, { i: c.i, err: String((e && e.message) || e) });
      return;
    }
    child.on("error", (e) => {
      // Without a pid it never started; with one, exit and close still come.
      if (!c.pid) this.answer(c, { i: c.i, err: String((e && e.message) || e) });
    });
    if (!child.pid) return;
    c.pid = child.pid;
    c.tree = new Tree([{ pid: c.pid, start: (stat(c.pid) || { start: null }).start }]);
    this.frame({ i: c.i, p: c.pid });
    child.stdin.on("error", () => { /* the command did not read all its stdin */ });
    child.stdin.end(data);
    this.pipe(c, child);
    if (c.t > 0) c.timer = setTimeout(() => this.end(c, "t"), Math.min(c.t, MAX_TIMER));
    child.on("exit", (code, sig) => this.exited(c, child, code, sig));
    child.on("close", () => { c.closed = true; this.settle(c); });
  }

  pipe(c, child) {
    child.stdout.on("data", (b) => { if (!c.answered) this.frame({ i: c.i, o: b.toString("base64") }); });
    child.stderr.on("data", (b) => { if (!c.answered) this.frame({ i: c.i, e: b.toString("base64") }); });
    this.outputs.push(child.stdout, child.stderr);
    if (this.backlog) { child.stdout.pause(); child.stderr.pause(); }
  }

  exited(c, child, code, sig) {
    c.exit = { code, signal: sig };
    // What a command that exited by itself left running is not ours to
    // kill: the provider leaves it alone too.
    if (!c.reason) { c.tree.tracked.clear(); clearTimeout(c.timer); }
    // A job it left running may hold its pipes open; it keeps running. No
    // second is counted while output waits for the program's own stdout.
    const drained = () => {
      if (this.backlog) { setTimeout(drained, DRAIN_MS); return; }
      child.stdout.destroy();
      child.stderr.destroy();
      c.closed = true;
      this.settle(c);
    };
    setTimeout(drained, DRAIN_MS);
  }

  // pollCancels takes the cancel files: each is removed once seen.
  pollCancels() {
    if (!this.dirMade) return;
    let names = [];
    try { names = fs.readdirSync(this.dir); } catch (e) { return; }
    for (const name of names) {
      try { fs.unlinkSync(this.dir + "/" + name); } catch (e) { /* already gone */ }
      if (/^(0|[1-9][0-9]*)$/.test(name) && Number(name) < this.cmds.length) this.end(this.cmds[Number(name)], "c");
    }
  }

  tick() {
    this.pollCancels();
    const running = this.cmds.filter((c) => c.pid && !c.exit && !c.killing);
    if (running.length === 0) return;
    const procs = scan();
    running.forEach((c) => c.tree.members(procs));
  }

  removeDir() {
    if (!this.dirMade) return;
    // A cancel file may land between the unlinks and the rmdir: try again.
    for (let k = 0; k < 5; k++) {
      try {
        fs.readdirSync(this.dir).forEach((name) => fs.unlinkSync(this.dir + "/" + name));
        fs.rmdirSync(this.dir);
        this.dirMade = false;
        return;
      } catch (e) { /* retry */ }
    }
  }

  finish() {
    clearInterval(this.ticker);
    this.removeDir();
    if (this.closing || this.dying) return;
    this.closing = true;
    // Exit once every frame, bye last, has left for the pipe: an exit
    // drops what is queued.
    process.stdout.write(this.nonce + " " + JSON.stringify({ z: 1 }) + "\n", (err) => process.exit(err ? 1 : 0));
  }

  // die ends the trees of the commands still running before the program
  // goes: synchronously, since it is about to exit.
  die(code) {
    if (this.dying) return;
    this.dying = true;
    clearInterval(this.ticker);
    const left = this.cmds.filter((c) => c.pid && !c.answered && (!c.exit || c.reason));
    new Ending(left.map((c) => c.tree), DIE_ROUNDS).now();
    this.removeDir();
    process.exit(code);
  }

  // start runs what stdin (buf) describes.
  start(buf) {
    const nl = buf.indexOf(10);
    const h = parseHeader(buf, nl);
    if (!h) {
      process.stderr.write("batch helper: stdin does not start with a header line\n");
      process.exit(2);
    }
    this.nonce = h.n;
    this.dir = h.d;
    try { fs.mkdirSync(this.dir, 0o700); this.dirMade = true; } catch (e) { /* cancel requests will not be seen */ }
    this.cmds = h.c.map((c, i) => ({ i, t: c.t }));
    this.frame({ h: 1 });
    if (this.cmds.length === 0) { this.finish(); return; }
    let off = nl + 1;
    const want = h.c.reduce((n, c) => n + c.b, 0);
    if (buf.length - off !== want) {
      // The data was changed on its way (bytes that were not UTF-8?): no
      // command gets another's.
      const why = "the helper read " + (buf.length - off) + " bytes of command data, its header says " + want;
      this.cmds.forEach((c) => this.answer(c, { i: c.i, err: why }));
      return;
    }
    this.reaper = subreaper();
    this.ticker = setInterval(() => this.tick(), TICK_MS);
    this.cmds.forEach((c, i) => {
      this.run(c, h.l, buf.subarray(off, off + h.c[i].b));
      off += h.c[i].b;
    });
  }
}

// parseHeader is stdin's header line (up to nl), or null.
function parseHeader(buf, nl) {
  let h = null;
  try { h = JSON.parse(buf.subarray(0, nl < 0 ? buf.length : nl).toString("utf8")); } catch (e) { return null; }
  const ok = nl >= 0 && h && typeof h.n === "string" && h.n !== "" && typeof h.d === "string" && typeof h.l === "string" &&
    Array.isArray(h.c) && h.c.every((c) => c && Number.isSafeInteger(c.b) && c.b >= 0 && typeof c.t === "number" && c.t >= 0);
  return ok ? h : null;
}

// subreaper is the arguments that run a command under REAPER (perl -e
// REAPER -- argv), or null where perl cannot make it a subreaper. Under
// it, what a command orphans comes to its subreaper, a member of its
// tree, instead of the sandbox's init: an Ending ends it with the rest.
function subreaper() {
  const r = cp.spawnSync("perl", ["-e", REAPER], { stdio: "ignore", env: process.env, timeout: 5000 });
  return r.status === 0 ? ["-e", REAPER, "--"] : null;
}

function batch() {
  const b = new Batch();
  for (const s of ["SIGTERM", "SIGHUP", "SIGINT"]) process.on(s, () => b.die(128 + os.constants.signals[s]));
  process.stdout.on("error", () => b.die(1));
  const chunks = [];
  process.stdin.on("data", (c) => chunks.push(c));
  process.stdin.on("end", () => b.start(Buffer.concat(chunks)));
}

// ---- reap ----

// reap ends what is left of a batch whose program died before answering:
// every process whose session or process group is one of the given
// leaders, and their descendants (the tree killer's Tree, nothing of this
// program's own session), then removes the batch's control directory. It
// refuses (exit 2, nothing done) a dir that is not a clean path under
// /tmp/ and a pid under 2; it exits 1 when processes survive SIGKILL.
function reap(dir, pids) {
  const refuse = (why) => { throw new Exit(2, "batch reap: " + why + ": nothing done"); };
  if (typeof dir !== "string" || !/^\/tmp\/./.test(dir)) refuse(dir + " is not under /tmp/");
  if (/\/\.{1,2}\/|\/\//.test(dir + "/")) refuse(dir + " is not a clean path");
  for (const p of pids) if (!/^[1-9][0-9]*$/.test(p) || p === "1") refuse(p + " is not a leader's pid");
  if (!stat(process.pid)) refuse("no /proc");
  const left = new Ending([new Tree(pids.map((p) => ({ pid: Number(p) })))], ROUNDS).now();
  removeAll(dir);
  if (left !== 0) throw new Exit(1, "batch reap: " + left + " processes survived SIGKILL");
}

// removeAll removes p and what it holds, following no link (rm -rf).
function removeAll(p) {
  try {
    if (fs.rmSync) fs.rmSync(p, { recursive: true, force: true });
    else fs.rmdirSync(p, { recursive: true });
  } catch (e) { /* gone, or left as it is */ }
}

// ---- sync: the sandbox's side of createos/delta ----
//
// Exit GO.EXIT_STORE_MISS: a store entry is missing or corrupt (it is
// removed); GO.EXIT_BAD_INPUT: bad input; GO.EXIT_STORE_BAD: the store was
// bad or is refused (see Store). Whatever fails leaves no output.
//
// The store is ~/.cache/paperclip-createos-sync (0700): 2-hex directories
// of entries named by their SHA-256, and tmp/, where entries are written,
// checked, then renamed into place. It is known by what it is, not by its
// path: its real path (links resolved) must lie outside the workspace, or
// nothing is made and every command exits GO.EXIT_STORE_BAD. It is opened
// and walked without following links (lstat, entries opened
// O_NOFOLLOW|O_NONBLOCK once lstat found a regular file), so no FIFO,
// device or socket is ever opened, and nothing is changed through a link.
// A link or anything else where the store, tmp/ or a 2-hex directory
// should be, or an entry that is not a regular file of its own, is removed
// without following it (the store made afresh where it was the store), and
// the command that met it exits GO.EXIT_STORE_BAD after one line on
// stderr: the worker moves that mapping whole.
//
// Bounds, as the worker's store: past GO.STORE_BYTES or GO.STORE_ENTRIES
// the least recently used entries go until both are at most their low
// water (GO.STORE_LOW_BYTES, GO.STORE_LOW_ENTRIES).

const MAGIC = Buffer.from(GO.MAGIC, "latin1");
const INLINE_FILE = 1 << 20; // a file up to this size goes inline in its recipe
const STORE_NAME = "paperclip-createos-sync";
const CHUNK = 4 << 20; // what a recipe reads of a content at once
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

const bad = (msg) => new Exit(GO.EXIT_BAD_INPUT, msg);
const refused = (why) => new Exit(GO.EXIT_STORE_BAD, "sandbox store not used: " + why);
const missing = (why) => new Exit(GO.EXIT_STORE_MISS, why);

function unlinkQuiet(p) { try { fs.unlinkSync(p); } catch (e) { /* gone */ } }

// removingOnError runs fn; when it throws, the outputs it was making go.
function removingOnError(outputs, fn) {
  try { return fn(); } catch (e) { outputs.forEach(unlinkQuiet); throw e; }
}

const lstat = (p) => fs.lstatSync(p, { throwIfNoEntry: false }) || null;

// realOf is p's real path: its deepest existing ancestor with links
// resolved, then the names below it that do not exist yet; null when a
// link on the way leads nowhere.
function realOf(p) {
  try { return fs.realpathSync.native(p); } catch (e) { if (e.code !== "ENOENT") return null; }
  if (lstat(p)) return null;
  const up = path.dirname(p);
  if (up === p) return null;
  const r = realOf(up);
  return r === null ? null : path.join(r, path.basename(p));
}

const within = (p, dir) => p === dir || p.startsWith(dir.endsWith("/") ? dir : dir + "/");

function describe(st) {
  if (st.isSymbolicLink()) return "a symbolic link";
  if (st.isDirectory()) return "a directory";
  if (st.isFile()) return st.nlink > 1 ? "a file linked from elsewhere" : "a file";
  if (st.isFIFO()) return "a FIFO";
  if (st.isSocket()) return "a socket";
  return "a device";
}

const ownFile = (st) => st.isFile() && st.nlink === 1;

// mkdirOwn makes directory p, or finds that a program beside this one just
// made it.
function mkdirOwn(p) {
  try { fs.mkdirSync(p, { mode: 0o700 }); } catch (e) {
    const st = e.code === "EEXIST" ? lstat(p) : null;
    if (!st || !st.isDirectory()) throw e;
  }
}

// storeDir is where the store is, or why it is refused: its real path
// must lie outside the workspace and not hold it.
function storeDir(workspace) {
  const home = os.homedir();
  if (!home || !path.isAbsolute(home)) throw refused("no home directory");
  const cache = path.join(home, ".cache");
  const ws = realOf(path.resolve(workspace)), real = realOf(cache);
  if (ws === null || real === null) throw refused("its path or the workspace's does not resolve (a link that leads nowhere)");
  const at = path.join(real, STORE_NAME);
  if (within(at, ws)) throw refused("its real path " + at + " is inside the workspace");
  if (within(ws, at)) throw refused("its real path " + at + " holds the workspace");
  return cache;
}

// Store is the sandbox's store, opened for one command.
class Store {
  constructor(dir) { this.dir = dir; this.subs = new Set(); this.why = ""; }

  // open finds the store and makes what it lacks. It throws
  // GO.EXIT_STORE_BAD when its real path is inside the workspace or it
  // cannot be made, and when it was bad (after making it afresh).
  static open(workspace) {
    const cache = storeDir(workspace);
    const s = new Store(path.join(cache, STORE_NAME));
    try {
      fs.mkdirSync(cache, { recursive: true, mode: 0o700 });
      s.realDir(s.dir, "the store");
      s.own();
      s.realDir(path.join(s.dir, "tmp"), "its tmp");
    } catch (e) {
      throw e instanceof Exit ? e : refused("cannot make it: " + (e.code || e.message));
    }
    s.fail();
    s.sweepTmp();
    return s;
  }

  path(hex) { return path.join(this.dir, hex.slice(0, 2), hex); }

  // realDir makes p a directory of its own: whatever else is there is
  // removed, never followed.
  realDir(p, what) {
    const st = lstat(p);
    if (st && st.isDirectory()) return;
    if (st) this.spoilt(p, st, what);
    mkdirOwn(p);
  }

  // own gives the store its mode through a descriptor that is no link's;
  // a store its owner may not read (mode 000) by its path, which lstat
  // has just found to be a directory.
  own() {
    let fd;
    try { fd = fs.openSync(this.dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW); } catch (e) {
      if (e.code !== "EACCES") throw e;
      fs.chmodSync(this.dir, 0o700);
      return;
    }
    try {
      if ((fs.fstatSync(fd).mode & 0o777) !== 0o700) fs.fchmodSync(fd, 0o700);
    } finally { fs.closeSync(fd); }
  }

  // spoilt removes a bad thing without following it and remembers why.
  spoilt(p, st, what) {
    try {
      if (st.isDirectory()) fs.rmSync(p, { recursive: true, force: true });
      else fs.unlinkSync(p);
    } catch (e) { /* gone */ }
    this.why = this.why || what + " was " + describe(st);
  }

  fail() {
    if (this.why) throw new Exit(GO.EXIT_STORE_BAD, "bad sandbox store: " + this.why + "; removed without following it");
  }

  // sweepTmp removes temp files of programs that are gone.
  sweepTmp() {
    const tmp = path.join(this.dir, "tmp");
    let names = [];
    try { names = fs.readdirSync(tmp); } catch (e) { return; }
    for (const n of names) {
      const pid = parseInt(n, 10);
      let alive = false;
      try { process.kill(pid, 0); alive = true; } catch (e) { alive = e.code === "EPERM"; }
      if (!alive || pid === process.pid) unlinkQuiet(path.join(tmp, n));
    }
  }

  // sub checks, once a command, the directory of hex's entries: it
  // reports whether it is there, making it when make is set.
  sub(hex, make) {
    const name = hex.slice(0, 2);
    if (this.subs.has(name)) return true;
    const p = path.join(this.dir, name), st = lstat(p);
    if (st && !st.isDirectory()) { this.spoilt(p, st, "directory " + name); this.fail(); }
    if (!st && !make) return false;
    if (!st) mkdirOwn(p);
    this.subs.add(name);
    return true;
  }

  // stat is entry hex's lstat when it is a regular file of its own, null
  // when it is missing; anything else there is removed.
  stat(hex) {
    if (!this.sub(hex, false)) return null;
    const p = this.path(hex), st = lstat(p);
    if (st && !ownFile(st)) { this.spoilt(p, st, "entry " + hex); this.fail(); }
    return st;
  }

  // read appends entry hex (n bytes) to sink; with check, it hashes it on
  // the way and removes it when it is not what its name says. Without,
  // only its size is checked: apply checks the whole output's hash and
  // then, on a mismatch, each entry it used (verifyEntries).
  read(hex, n, sink, check) {
    const p = this.path(hex);
    if (!this.stat(hex)) throw missing("missing entry");
    let fd;
    try { fd = fs.openSync(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK); } catch (e) {
      if (e.code === "ELOOP") unlinkQuiet(p);
      throw missing("missing entry");
    }
    try {
      const st = fs.fstatSync(fd);
      if (!ownFile(st)) { this.spoilt(p, st, "entry " + hex); this.fail(); }
      if (st.size !== n) { unlinkQuiet(p); throw missing("corrupt entry"); }
      const h = check ? crypto.createHash("sha256") : null;
      for (let off = 0; off < n;) {
        const b = readAt(fd, Math.min(GO.MAX_FRAME, n - off), off);
        if (h) h.update(b);
        sink(b); off += b.length;
      }
      if (h && h.digest("hex") !== hex) { unlinkQuiet(p); throw missing("corrupt entry"); }
      const now = new Date();
      try { fs.futimesSync(fd, now, now); } catch (e) { /* kept as it was */ }
    } finally { fs.closeSync(fd); }
  }

  // walk lists the entries by lstat, opening none; a 2-hex name that is
  // not a directory and an entry that is not a regular file of its own
  // are removed, and the walk then fails.
  walk() {
    const out = [];
    for (const d of fs.readdirSync(this.dir, { withFileTypes: true })) {
      if (!/^[0-9a-f]{2}$/.test(d.name)) continue;
      const sub = path.join(this.dir, d.name);
      if (!d.isDirectory()) { const st = lstat(sub); if (st) this.spoilt(sub, st, "directory " + d.name); continue; }
      for (const hex of fs.readdirSync(sub)) {
        if (!/^[0-9a-f]{64}$/.test(hex) || !hex.startsWith(d.name)) continue;
        const p = path.join(sub, hex), st = lstat(p);
        if (st && ownFile(st)) out.push({ hex, size: st.size, mtime: st.mtimeMs });
        else if (st) this.spoilt(p, st, "entry " + hex);
      }
    }
    this.fail();
    return out;
  }

  // bound removes the least recently used of all (the walk's entries)
  // once the store is past a bound, until it is at most the low water of
  // both; it returns the entries kept.
  bound(all) {
    let bytes = all.reduce((s, e) => s + e.size, 0), count = all.length;
    if (bytes <= GO.STORE_BYTES && count <= GO.STORE_ENTRIES) return all;
    all.sort((a, b) => a.mtime - b.mtime);
    let i = 0;
    for (; i < all.length && (bytes > GO.STORE_LOW_BYTES || count > GO.STORE_LOW_ENTRIES); i++) {
      unlinkQuiet(this.path(all[i].hex));
      bytes -= all[i].size; count--;
    }
    return all.slice(i);
  }
}

// Entry is an entry being written: its bytes go to tmp/ and are renamed
// into place on commit, when they hashed to its name. None is written for
// what the store holds (in have, or found there).
class Entry {
  constructor(store, hex, have) {
    this.store = store; this.hex = hex; this.fd = -1;
    if (have ? have.has(hex) : store.stat(hex)) return;
    this.tmp = path.join(store.dir, "tmp", process.pid + "-" + crypto.randomBytes(8).toString("hex"));
    try { this.fd = fs.openSync(this.tmp, "wx", 0o600); } catch (e) { this.fd = -1; }
  }

  write(buf) {
    if (this.fd < 0) return;
    try { writeAll(this.fd, buf); } catch (e) { this.abort(); }
  }

  commit(ok) {
    if (this.fd < 0) return false;
    fs.closeSync(this.fd); this.fd = -1;
    if (!ok) { unlinkQuiet(this.tmp); return false; }
    try {
      this.store.sub(this.hex, true);
      fs.renameSync(this.tmp, this.store.path(this.hex));
      return true;
    } catch (e) {
      unlinkQuiet(this.tmp);
      if (e instanceof Exit) throw e;
      return false;
    }
  }

  abort() {
    if (this.fd < 0) return;
    try { fs.closeSync(this.fd); } catch (e) { /* closed */ }
    unlinkQuiet(this.tmp);
    this.fd = -1;
  }
}

function writeAll(fd, buf, pos) {
  for (let off = 0; off < buf.length;) {
    off += fs.writeSync(fd, buf, off, buf.length - off, pos === undefined ? null : pos + off);
  }
}

function readAt(fd, len, pos) {
  const buf = Buffer.allocUnsafe(len);
  for (let off = 0; off < len;) {
    const n = fs.readSync(fd, buf, off, len - off, pos + off);
    if (n === 0) throw bad("short read");
    off += n;
  }
  return buf;
}

// Frames reads a stream's decoded bytes.
class Frames {
  constructor(fd) {
    this.fd = fd; this.pos = 0; this.buf = Buffer.alloc(0);
    if (!this.raw(MAGIC.length).equals(MAGIC)) throw bad("no magic");
  }

  raw(n) {
    const b = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const k = fs.readSync(this.fd, b, off, n - off, this.pos);
      if (k === 0) break;
      off += k; this.pos += k;
    }
    return b.subarray(0, off);
  }

  fill() {
    const h = this.raw(9);
    if (h.length === 0) return false;
    if (h.length < 9) throw bad("truncated frame");
    const rawLen = h.readUInt32BE(1), encLen = h.readUInt32BE(5);
    if (rawLen === 0 || rawLen > GO.MAX_FRAME || encLen > GO.MAX_FRAME + GO.MAX_FRAME / 8) throw bad("frame size");
    const data = this.raw(encLen);
    if (data.length < encLen) throw bad("truncated frame");
    this.buf = decodeFrame(h[0], data, rawLen);
    return true;
  }

  // take returns 1..max bytes.
  take(max) {
    while (this.buf.length === 0) if (!this.fill()) throw bad("truncated");
    const n = Math.min(max, this.buf.length);
    const b = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return b;
  }

  exact(n) {
    const parts = [];
    let got = 0;
    while (got < n) { const b = this.take(n - got); parts.push(b); got += b.length; }
    return parts.length === 1 ? parts[0] : Buffer.concat(parts);
  }

  atEnd() { return this.buf.length === 0 && !this.fill(); }
}

// decodeFrame is a frame's decoded bytes: codec 0 raw, 1 raw DEFLATE.
function decodeFrame(codec, data, rawLen) {
  if (codec === 0) {
    if (data.length !== rawLen) throw bad("frame size");
    return data;
  }
  if (codec !== 1) throw bad("unknown codec");
  let out;
  try { out = zlib.inflateRawSync(data, { maxOutputLength: GO.MAX_FRAME }); } catch (e) { throw bad("frame does not decode"); }
  if (out.length !== rawLen) throw bad("frame does not decode to its size");
  return out;
}

// Out writes a stream's frames.
class Out {
  constructor(file) { this.fd = fs.openSync(file, "w", 0o600); writeAll(this.fd, MAGIC); this.buf = []; this.len = 0; }

  write(b) {
    while (b.length > 0) {
      const k = Math.min(GO.MAX_FRAME - this.len, b.length);
      this.buf.push(b.subarray(0, k)); this.len += k; b = b.subarray(k);
      if (this.len === GO.MAX_FRAME) this.frame();
    }
  }

  frame() {
    if (this.len === 0) return;
    const raw = Buffer.concat(this.buf, this.len);
    const enc = zlib.deflateRawSync(raw, { level: GO.LEVEL });
    const z = enc.length * 16 <= raw.length * 15;
    const h = Buffer.alloc(9);
    h[0] = z ? 1 : 0; h.writeUInt32BE(raw.length, 1); h.writeUInt32BE(z ? enc.length : raw.length, 5);
    writeAll(this.fd, h); writeAll(this.fd, z ? enc : raw);
    this.buf = []; this.len = 0;
  }

  literal(b) { const h = Buffer.alloc(5); h[0] = 0x48; h.writeUInt32BE(b.length, 1); this.write(h); this.write(b); }

  head(kind, hash, n) {
    const h = Buffer.alloc(41); h[0] = kind; hash.copy(h, 1); h.writeBigUInt64BE(BigInt(n), 33); this.write(h);
  }

  close() { this.frame(); fs.closeSync(this.fd); }
}

function readHead(f) {
  const b = f.exact(40);
  const n = b.readBigUInt64BE(32);
  if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw bad("record size");
  return { hash: Buffer.from(b.subarray(0, 32)), n: Number(n) };
}

// verifyEntries checks every entry in used, removing the bad ones; it
// reports whether one was bad.
function verifyEntries(store, used) {
  let spoilt = false;
  for (const [hex, n] of used) {
    try { store.read(hex, n, () => {}, true); } catch (e) {
      if (e.code === GO.EXIT_STORE_BAD) throw e;
      spoilt = true;
    }
  }
  return spoilt;
}

function apply(stream, outPath, workspace) {
  const store = Store.open(workspace);
  const inFd = fs.openSync(stream, "r");
  try {
    removingOnError([outPath], () => {
      // Read and written: a content met again in this stream is read back.
      const outFd = fs.openSync(outPath, "w+", 0o600);
      let wrote;
      try { wrote = new Rebuild(store, new Frames(inFd), outFd).run(); } finally { fs.closeSync(outFd); }
      if (wrote) store.bound(store.walk());
    });
  } finally { fs.closeSync(inFd); }
}

// Rebuild writes the output of the records a stream holds.
class Rebuild {
  constructor(store, f, outFd) {
    this.store = store; this.f = f; this.outFd = outFd;
    this.total = crypto.createHash("sha256");
    this.seen = new Map(); this.used = new Map();
    this.pos = 0; this.wrote = false;
  }

  emit(b) { writeAll(this.outFd, b, this.pos); this.total.update(b); this.pos += b.length; }

  // run reads every record; it reports whether it stored a content.
  run() {
    const f = this.f, emit = (b) => this.emit(b);
    for (;;) {
      const kind = f.exact(1)[0];
      if (kind === 0x48) {
        for (let n = f.exact(4).readUInt32BE(0); n > 0;) { const b = f.take(n); emit(b); n -= b.length; }
      } else if (kind === 0x43) {
        const { hash, n } = readHead(f), hex = hash.toString("hex"), start = this.pos;
        this.wrote = keepContent(this.store, f, hex, n, emit) || this.wrote;
        this.seen.set(hex, [start, n]);
      } else if (kind === 0x52) {
        this.reference(readHead(f));
      } else if (kind === 0x45) {
        this.end(readHead(f));
        return this.wrote;
      } else throw bad("unknown record");
    }
  }

  // reference emits what an 'R' record names: from the output when this
  // stream carried it, else from the store.
  reference({ hash, n }) {
    const hex = hash.toString("hex"), got = this.seen.get(hex), emit = (b) => this.emit(b);
    if (got && got[1] === n) readBack(this.outFd, got[0], n, emit);
    else { this.store.read(hex, n, emit, false); this.used.set(hex, n); }
  }

  // end checks the 'E' record against the output.
  end({ hash, n }) {
    if (n !== this.pos || !this.total.digest().equals(hash)) {
      if (verifyEntries(this.store, this.used)) throw missing("corrupt entry");
      throw bad("output does not match the stream's end");
    }
    if (!this.f.atEnd()) throw bad("data after the end");
  }
}

// keepContent emits a 'C' record's n bytes and keeps them in the store
// when they hash to hex; it reports whether it stored them.
function keepContent(store, f, hex, n, emit) {
  const e = new Entry(store, hex), h = crypto.createHash("sha256");
  for (let left = n; left > 0;) {
    const b = f.take(Math.min(left, GO.MAX_FRAME));
    emit(b); h.update(b); e.write(b); left -= b.length;
  }
  const ok = h.digest("hex") === hex;
  const wrote = e.commit(ok);
  if (!ok) throw bad("content does not match its hash");
  return wrote;
}

// readBack emits n bytes the output already holds at start.
function readBack(outFd, start, n, emit) {
  for (let off = 0; off < n;) {
    const b = readAt(outFd, Math.min(GO.MAX_FRAME, n - off), start + off);
    emit(b); off += b.length;
  }
}

function index(outPath, workspace) {
  const store = Store.open(workspace);
  removingOnError([outPath], () => {
    const kept = store.bound(store.walk());
    const buf = Buffer.allocUnsafe(GO.INDEX_MAGIC.length + 32 * kept.length);
    const at = buf.write(GO.INDEX_MAGIC, 0, "latin1");
    kept.forEach((e, i) => buf.write(e.hex, at + 32 * i, "hex"));
    const fd = fs.openSync(outPath, "w", 0o600);
    try { writeAll(fd, buf); } finally { fs.closeSync(fd); }
  });
}

function octal(b) {
  const s = b.toString("latin1").replace(/[\0 ]+$/, "").replace(/^[\0 ]+/, "");
  if (s === "") return 0;
  if (!/^[0-7]+$/.test(s)) return -1;
  return parseInt(s, 8);
}

function sizeField(b) {
  if ((b[0] & 0x80) === 0) return octal(b);
  if (b[0] !== 0x80) return -1;
  let v = 0;
  for (let i = 1; i < b.length; i++) { v = v * 256 + b[i]; if (v > Number.MAX_SAFE_INTEGER) return -1; }
  return v;
}

// member: [data bytes, regular] of a tar header block, or null.
function member(h) {
  const want = octal(h.subarray(148, 156));
  let sum = 0;
  for (let i = 0; i < 512; i++) sum += i >= 148 && i < 156 ? 32 : h[i];
  if (want < 0 || sum !== want) return null;
  const size = sizeField(h.subarray(124, 136));
  if (size < 0) return null;
  const t = String.fromCharCode(h[156]);
  if ("123456".includes(t) && h[156] !== 0) return [0, false];
  return [size, h[156] === 0 || t === "0" || t === "7"];
}

// Seq reads a file front to back through a large buffer.
class Seq {
  constructor(fd) { this.fd = fd; this.pos = 0; this.buf = Buffer.allocUnsafe(8 << 20); this.start = 0; this.end = 0; }

  // read returns the next n bytes (n at most the buffer's size).
  read(n) {
    if (this.end - this.start < n) {
      this.buf.copy(this.buf, 0, this.start, this.end);
      this.end -= this.start; this.start = 0;
      while (this.end < n) {
        const k = fs.readSync(this.fd, this.buf, this.end, this.buf.length - this.end, this.pos);
        if (k === 0) throw bad("short read");
        this.end += k; this.pos += k;
      }
    }
    const b = this.buf.subarray(this.start, this.start + n);
    this.start += n;
    return b;
  }
}

function recipe(kind, src, outPath, workspace) {
  const store = Store.open(workspace);
  removingOnError([outPath, outPath + ".idx"], () => {
    const fd = fs.openSync(src, "r");
    try {
      const r = new Recipe(store, fd, outPath);
      if (kind === "file") r.file();
      else r.archive();
      r.close();
    } finally { fs.closeSync(fd); }
  });
}

// Recipe writes the recipe of a source and its index, keeping in the
// store each content it does not hold.
class Recipe {
  constructor(store, fd, outPath) {
    this.store = store; this.outPath = outPath;
    this.have = new Set(store.walk().map((e) => e.hex));
    this.size = fs.fstatSync(fd).size;
    this.seq = new Seq(fd);
    this.out = new Out(outPath);
    this.idx = [];
    this.wrote = false;
    this.lit = []; this.litLen = 0;
  }

  flush() {
    if (this.litLen === 0) return;
    this.out.literal(Buffer.concat(this.lit, this.litLen));
    this.lit = []; this.litLen = 0;
  }

  literal(b) {
    this.lit.push(Buffer.from(b)); this.litLen += b.length;
    if (this.litLen >= 64 << 10) this.flush();
  }

  // literalRun is the next n bytes as literal output.
  literalRun(n) {
    for (let o = 0; o < n;) { const k = Math.min(CHUNK, n - o); this.literal(this.seq.read(k)); o += k; }
  }

  file() { if (this.size > 0) this.content(0, this.size, this.size <= INLINE_FILE); }

  // archive splits a tar at its members: each regular file's data of at
  // least GO.MIN_CONTENT bytes is a content, every other byte literal.
  archive() {
    const size = this.size;
    for (let off = 0; off < size;) {
      if (size - off < 512) { this.literalRun(size - off); return; }
      const h = this.seq.read(512);
      if (h.every((c) => c === 0)) { this.literal(h); this.literalRun(size - off - 512); return; }
      const m = member(h);
      if (!m) throw bad("not a tar archive");
      const [data, regular] = m, padded = Math.ceil(data / 512) * 512;
      if (padded > size - off - 512) throw bad("not a tar archive");
      this.literal(h);
      if (!regular || data < GO.MIN_CONTENT) this.literalRun(padded);
      else {
        this.content(off + 512, data, false);
        if (padded > data) this.literal(this.seq.read(padded - data));
      }
      off += 512 + padded;
    }
  }

  // content reads n bytes at off: hashed, kept in the store when it is
  // not there, named by reference (or inline when asked). What is larger
  // than one chunk goes to a store temp file as it is read.
  content(off, n, inline) {
    const h = crypto.createHash("sha256"), parts = [];
    let spill = null;
    for (let o = 0; o < n;) {
      const b = this.seq.read(Math.min(CHUNK, n - o));
      h.update(b);
      if (n <= CHUNK) parts.push(Buffer.from(b));
      else {
        if (!spill) spill = new Entry(this.store, "spill-" + off, new Set());
        spill.write(b);
      }
      o += b.length;
    }
    const hash = h.digest();
    this.flush();
    if (inline) { this.out.head(0x43, hash, n); this.out.write(Buffer.concat(parts, n)); return; }
    this.out.head(0x52, hash, n);
    const rec = Buffer.alloc(48); hash.copy(rec); rec.writeBigUInt64BE(BigInt(off), 32); rec.writeBigUInt64BE(BigInt(n), 40);
    this.idx.push(rec);
    this.keep(hash.toString("hex"), spill, parts, n);
  }

  // keep puts a content in the store unless it holds it: from its spill
  // file, or from parts.
  keep(hex, spill, parts, n) {
    if (this.have.has(hex)) { if (spill) spill.commit(false); return; }
    let e = spill;
    if (e) e.hex = hex;
    else { e = new Entry(this.store, hex, this.have); e.write(Buffer.concat(parts, n)); }
    if (e.commit(true)) { this.have.add(hex); this.wrote = true; }
  }

  // close ends the recipe: the end names no hash (the worker checks each
  // content it uses by its own, and the size).
  close() {
    this.flush();
    this.out.head(0x45, Buffer.alloc(32), this.size);
    this.out.close();
    fs.writeFileSync(this.outPath + ".idx", Buffer.concat(this.idx), { mode: 0o600 });
    if (this.wrote) this.store.bound(this.store.walk());
  }
}

function pack(src, idxPath, wantPath, outPath) {
  const idx = fs.readFileSync(idxPath), want = fs.readFileSync(wantPath);
  const at = new Map();
  for (let i = 0; i + 48 <= idx.length; i += 48) {
    at.set(idx.subarray(i, i + 32).toString("hex"), [Number(idx.readBigUInt64BE(i + 32)), Number(idx.readBigUInt64BE(i + 40))]);
  }
  const fd = fs.openSync(src, "r");
  const out = new Out(outPath);
  for (let i = 0; i + 32 <= want.length; i += 32) {
    const hash = want.subarray(i, i + 32), got = at.get(hash.toString("hex"));
    if (!got) continue;
    out.head(0x43, hash, got[1]);
    for (let o = 0; o < got[1];) { const b = readAt(fd, Math.min(GO.MAX_FRAME, got[1] - o), got[0] + o); out.write(b); o += b.length; }
  }
  out.head(0x45, Buffer.alloc(32), 0);
  out.close();
  fs.closeSync(fd);
}

// ---- main ----

// run runs a subcommand that ends when it returns or throws.
function run(name, fn) {
  try {
    fn();
  } catch (e) {
    process.stderr.write(name + e.message + "\n");
    process.exit(e instanceof Exit ? e.code : GO.EXIT_BAD_INPUT);
  }
}

function main(argv) {
  const [cmd, ...a] = argv;
  const sync = (fn) => run("paperclip sync helper: ", fn);
  switch (cmd) {
    case "batch": return batch();
    case "reap": return run("", () => reap(a[0], a.slice(1)));
    case "apply": return sync(() => apply(a[0], a[1], a[2]));
    case "index": return sync(() => index(a[0], a[1]));
    case "recipe": return sync(() => recipe(a[0], a[1], a[2], a[3]));
    case "pack": return sync(() => pack(a[0], a[1], a[2], a[3]));
  }
  return sync(() => { throw bad("unknown command"); });
}

main(process.argv.slice(1));
