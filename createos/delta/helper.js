// The sandbox's side of the createos driver's incremental sync (Go package
// createos/delta has the format). Run as: node -e <this> <command> <args>.
//   apply  <stream> <out> <workspace>   rebuild a file from a stream
//   index  <out> <workspace>            list the store's hashes (32 bytes each)
//   recipe <tar|file> <src> <out> <workspace>
//                                       describe src by reference (+ <out>.idx)
//   pack   <src> <idx> <want> <out>     the contents of src named in want
// Exit 0 done; 91 a store entry is missing or corrupt (it is removed);
// 93 bad input; 95 the store was bad or is refused (see below). Whatever
// fails leaves no output.
//
// The store is ~/.cache/paperclip-createos-sync (0700): 2-hex directories
// of entries named by their SHA-256, and tmp/, where entries are written,
// checked, then renamed into place. It is known by what it is, not by its
// path: its real path (links resolved) must lie outside the workspace, or
// nothing is made and every command exits 95. It is opened and walked
// without following links (lstat, entries opened O_NOFOLLOW|O_NONBLOCK
// once lstat found a regular file), so no FIFO, device or socket is ever
// opened, and nothing is changed through a link. A link or anything else
// where the store, tmp/ or a 2-hex directory should be, or an entry that
// is not a regular file of its own, is removed without following it (the
// store made afresh where it was the store), and the command that met it
// exits 95 after one line on stderr: the worker moves that mapping whole.
//
// Bounds, as the worker's store: past STORE_BYTES or STORE_ENTRIES the
// least recently used entries go until both are under LOW_WATER of their
// bound. STORE_ENTRIES keeps an index (32 bytes an entry) within 32 MiB.
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");
const zlib = require("zlib");
const crypto = require("crypto");

const MAGIC = Buffer.from("PCSYNC1\n");
const MAX_FRAME = 1 << 20;
const MIN_CONTENT = 128;
const INLINE_FILE = 1 << 20;
const STORE_NAME = "paperclip-createos-sync";
const STORE_BYTES = 2 * 1024 * 1024 * 1024;
const STORE_ENTRIES = 1 << 20;
const LOW_WATER = 7 / 8;
const LEVEL = 5;
const EXIT_MISS = 91, EXIT_BAD_INPUT = 93, EXIT_STORE_BAD = 95;
const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

class Exit extends Error {
  constructor(code, msg) { super(msg); this.code = code; }
}
const bad = (msg) => new Exit(EXIT_BAD_INPUT, msg);
const refused = (why) => new Exit(EXIT_STORE_BAD, "sandbox store not used: " + why);

function unlinkQuiet(p) { try { fs.unlinkSync(p); } catch (e) {} }

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

// mkdirOwn makes directory p, or finds that a helper beside this one just
// made it.
function mkdirOwn(p) {
  try { fs.mkdirSync(p, { mode: 0o700 }); } catch (e) {
    const st = e.code === "EEXIST" ? lstat(p) : null;
    if (!st || !st.isDirectory()) throw e;
  }
}

// Store is the sandbox's store, opened for one command.
class Store {
  constructor(dir) { this.dir = dir; this.subs = new Set(); this.why = ""; }

  // open finds the store and makes what it lacks. It throws EXIT_STORE_BAD
  // when its real path is inside the workspace or it cannot be made, and
  // when it was bad (after making it afresh).
  static open(workspace) {
    const home = os.homedir();
    if (!home || !path.isAbsolute(home)) throw refused("no home directory");
    const cache = path.join(home, ".cache");
    const ws = realOf(path.resolve(workspace)), real = realOf(cache);
    if (ws === null || real === null) throw refused("its path or the workspace's does not resolve (a link that leads nowhere)");
    const at = path.join(real, STORE_NAME);
    if (within(at, ws)) throw refused("its real path " + at + " is inside the workspace");
    if (within(ws, at)) throw refused("its real path " + at + " holds the workspace");
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
    } catch (e) {}
    this.why = this.why || what + " was " + describe(st);
  }

  fail() {
    if (this.why) throw new Exit(EXIT_STORE_BAD, "bad sandbox store: " + this.why + "; removed without following it");
  }

  // sweepTmp removes temp files of helpers that are gone.
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
    if (!this.stat(hex)) throw new Exit(EXIT_MISS, "missing entry");
    let fd;
    try { fd = fs.openSync(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK); } catch (e) {
      if (e.code === "ELOOP") unlinkQuiet(p);
      throw new Exit(EXIT_MISS, "missing entry");
    }
    try {
      const st = fs.fstatSync(fd);
      if (!ownFile(st)) { this.spoilt(p, st, "entry " + hex); this.fail(); }
      if (st.size !== n) { unlinkQuiet(p); throw new Exit(EXIT_MISS, "corrupt entry"); }
      const h = check ? crypto.createHash("sha256") : null;
      for (let off = 0; off < n; ) {
        const b = readAt(fd, Math.min(MAX_FRAME, n - off), off);
        if (h) h.update(b);
        sink(b); off += b.length;
      }
      if (h && h.digest("hex") !== hex) { unlinkQuiet(p); throw new Exit(EXIT_MISS, "corrupt entry"); }
      const now = new Date();
      try { fs.futimesSync(fd, now, now); } catch (e) {}
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
  // once the store is past STORE_BYTES or STORE_ENTRIES, until it is
  // under LOW_WATER of both; it returns the entries kept.
  bound(all) {
    let bytes = all.reduce((s, e) => s + e.size, 0), count = all.length;
    if (bytes <= STORE_BYTES && count <= STORE_ENTRIES) return all;
    all.sort((a, b) => a.mtime - b.mtime);
    let i = 0;
    for (; i < all.length && (bytes > STORE_BYTES * LOW_WATER || count > STORE_ENTRIES * LOW_WATER); i++) {
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
  abort() { if (this.fd >= 0) { try { fs.closeSync(this.fd); } catch (e) {} unlinkQuiet(this.tmp); this.fd = -1; } }
}

function writeAll(fd, buf, pos) {
  let off = 0;
  while (off < buf.length) {
    const n = fs.writeSync(fd, buf, off, buf.length - off, pos === undefined ? null : pos + off);
    off += n;
  }
}

function readAt(fd, len, pos) {
  const buf = Buffer.allocUnsafe(len);
  let off = 0;
  while (off < len) {
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
    if (rawLen === 0 || rawLen > MAX_FRAME || encLen > MAX_FRAME + MAX_FRAME / 8) throw bad("frame size");
    const data = this.raw(encLen);
    if (data.length < encLen) throw bad("truncated frame");
    let out;
    if (h[0] === 0) { if (encLen !== rawLen) throw bad("frame size"); out = data; }
    else if (h[0] === 1) {
      try { out = zlib.inflateRawSync(data, { maxOutputLength: MAX_FRAME }); } catch (e) { throw bad("frame does not decode"); }
      if (out.length !== rawLen) throw bad("frame does not decode to its size");
    } else throw bad("unknown codec");
    this.buf = out;
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

// Out writes a stream's frames.
class Out {
  constructor(file) { this.fd = fs.openSync(file, "w", 0o600); writeAll(this.fd, MAGIC); this.buf = []; this.len = 0; }
  write(b) {
    while (b.length > 0) {
      const k = Math.min(MAX_FRAME - this.len, b.length);
      this.buf.push(b.subarray(0, k)); this.len += k; b = b.subarray(k);
      if (this.len === MAX_FRAME) this.frame();
    }
  }
  frame() {
    if (this.len === 0) return;
    const raw = Buffer.concat(this.buf, this.len);
    const enc = zlib.deflateRawSync(raw, { level: LEVEL });
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
      if (e.code === EXIT_STORE_BAD) throw e;
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
      try { wrote = rebuild(store, new Frames(inFd), outFd); } finally { fs.closeSync(outFd); }
      if (wrote) store.bound(store.walk());
    });
  } finally { fs.closeSync(inFd); }
}

// rebuild writes the output of the records f reads to outFd; it reports
// whether it stored a content.
function rebuild(store, f, outFd) {
  const total = crypto.createHash("sha256");
  const seen = new Map(), used = new Map();
  let pos = 0, wrote = false;
  const emit = (b) => { writeAll(outFd, b, pos); total.update(b); pos += b.length; };
  for (;;) {
    const kind = f.exact(1)[0];
    if (kind === 0x48) {
      for (let n = f.exact(4).readUInt32BE(0); n > 0; ) { const b = f.take(n); emit(b); n -= b.length; }
    } else if (kind === 0x43) {
      const { hash, n } = readHead(f), hex = hash.toString("hex"), start = pos;
      wrote = keepContent(store, f, hex, n, emit) || wrote;
      seen.set(hex, [start, n]);
    } else if (kind === 0x52) {
      const { hash, n } = readHead(f), hex = hash.toString("hex"), got = seen.get(hex);
      if (got && got[1] === n) readBack(outFd, got[0], n, emit);
      else { store.read(hex, n, emit, false); used.set(hex, n); }
    } else if (kind === 0x45) {
      const { hash, n } = readHead(f);
      if (n !== pos || !total.digest().equals(hash)) {
        if (verifyEntries(store, used)) throw new Exit(EXIT_MISS, "corrupt entry");
        throw bad("output does not match the stream's end");
      }
      if (!f.atEnd()) throw bad("data after the end");
      return wrote;
    } else throw bad("unknown record");
  }
}

// keepContent emits a 'C' record's n bytes and keeps them in the store
// when they hash to hex; it reports whether it stored them.
function keepContent(store, f, hex, n, emit) {
  const e = new Entry(store, hex), h = crypto.createHash("sha256");
  for (let left = n; left > 0; ) {
    const b = f.take(Math.min(left, MAX_FRAME));
    emit(b); h.update(b); e.write(b); left -= b.length;
  }
  const ok = h.digest("hex") === hex;
  const wrote = e.commit(ok);
  if (!ok) throw bad("content does not match its hash");
  return wrote;
}

// readBack emits n bytes the output already holds at start.
function readBack(outFd, start, n, emit) {
  for (let off = 0; off < n; ) {
    const b = readAt(outFd, Math.min(MAX_FRAME, n - off), start + off);
    emit(b); off += b.length;
  }
}

function index(outPath, workspace) {
  const store = Store.open(workspace);
  removingOnError([outPath], () => {
    const kept = store.bound(store.walk());
    const buf = Buffer.allocUnsafe(8 + 32 * kept.length);
    buf.write("PCINDEX\n", 0, "latin1");
    kept.forEach((e, i) => buf.write(e.hex, 8 + 32 * i, "hex"));
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
  removingOnError([outPath, outPath + ".idx"], () => describeSrc(store, kind, src, outPath));
}

// describeSrc writes the recipe of src and its index.
function describeSrc(store, kind, src, outPath) {
  const have = new Set(store.walk().map((e) => e.hex));
  const fd = fs.openSync(src, "r");
  const size = fs.fstatSync(fd).size;
  const out = new Out(outPath);
  const idx = [];
  const seq = new Seq(fd);
  const CHUNK = 4 << 20;
  let wrote = false;
  let lit = [], litLen = 0;
  const flush = () => { if (litLen) { out.literal(Buffer.concat(lit, litLen)); lit = []; litLen = 0; } };
  const literal = (b) => { lit.push(Buffer.from(b)); litLen += b.length; if (litLen >= 64 << 10) flush(); };
  // content reads n bytes at off from seq: hashed, kept in the store when
  // it is not there, named by reference (or inline when asked).
  const content = (off, n, inline) => {
    const h = crypto.createHash("sha256");
    const parts = [];
    let spill = null; // content larger than one chunk goes to a store temp file as it is read
    for (let o = 0; o < n; ) {
      const b = seq.read(Math.min(CHUNK, n - o));
      h.update(b);
      if (n <= CHUNK) parts.push(Buffer.from(b));
      else {
        if (!spill) spill = new Entry(store, "spill-" + off, new Set());
        spill.write(b);
      }
      o += b.length;
    }
    const hash = h.digest(), hex = hash.toString("hex");
    flush();
    if (inline) { out.head(0x43, hash, n); out.write(Buffer.concat(parts, n)); return; }
    out.head(0x52, hash, n);
    const rec = Buffer.alloc(48); hash.copy(rec); rec.writeBigUInt64BE(BigInt(off), 32); rec.writeBigUInt64BE(BigInt(n), 40);
    idx.push(rec);
    if (have.has(hex)) { if (spill) spill.commit(false); return; }
    if (spill) {
      spill.hex = hex;
      if (spill.commit(true)) { have.add(hex); wrote = true; }
      return;
    }
    const e = new Entry(store, hex, have);
    e.write(Buffer.concat(parts, n));
    if (e.commit(true)) { have.add(hex); wrote = true; }
  };
  if (kind === "file") {
    if (size > 0) content(0, size, size <= INLINE_FILE);
  } else {
    let off = 0;
    while (off < size) {
      if (size - off < 512) { literal(seq.read(size - off)); off = size; break; }
      const h = seq.read(512);
      if (h.every((c) => c === 0)) {
        literal(h);
        for (let o = off + 512; o < size; ) { const k = Math.min(CHUNK, size - o); literal(seq.read(k)); o += k; }
        off = size; break;
      }
      const m = member(h);
      if (!m) throw bad("not a tar archive");
      const [data, regular] = m, padded = Math.ceil(data / 512) * 512;
      if (padded > size - off - 512) throw bad("not a tar archive");
      literal(h);
      if (!regular || data < MIN_CONTENT) {
        for (let o = 0; o < padded; ) { const k = Math.min(CHUNK, padded - o); literal(seq.read(k)); o += k; }
      } else {
        content(off + 512, data, false);
        if (padded > data) literal(seq.read(padded - data));
      }
      off += 512 + padded;
    }
  }
  flush();
  // The end names no hash: the worker checks each content it uses by its
  // own, and the size.
  out.head(0x45, Buffer.alloc(32), size);
  out.close();
  fs.writeFileSync(outPath + ".idx", Buffer.concat(idx), { mode: 0o600 });
  fs.closeSync(fd);
  if (wrote) store.bound(store.walk());
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
    for (let o = 0; o < got[1]; ) { const b = readAt(fd, Math.min(MAX_FRAME, got[1] - o), got[0] + o); out.write(b); o += b.length; }
  }
  out.head(0x45, Buffer.alloc(32), 0);
  out.close();
  fs.closeSync(fd);
}

function main(argv) {
  const [cmd, ...a] = argv;
  switch (cmd) {
    case "apply": return apply(a[0], a[1], a[2]);
    case "index": return index(a[0], a[1]);
    case "recipe": return recipe(a[0], a[1], a[2], a[3]);
    case "pack": return pack(a[0], a[1], a[2], a[3]);
  }
  throw bad("unknown command");
}

try {
  main(process.argv.slice(1));
} catch (e) {
  process.stderr.write("paperclip sync helper: " + e.message + "\n");
  process.exit(e instanceof Exit ? e.code : EXIT_BAD_INPUT);
}
