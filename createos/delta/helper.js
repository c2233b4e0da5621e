// The sandbox's side of the createos driver's incremental sync (Go package
// createos/delta has the format). Run as: node -e <this> <command> <args>.
//   apply  <stream> <out> <workspace>   rebuild a file from a stream
//   index  <out> <workspace>            list the store's hashes (32 bytes each)
//   recipe <tar|file> <src> <out> <workspace>
//                                       describe src by reference (+ <out>.idx)
//   pack   <src> <idx> <want> <out>     the contents of src named in want
// Exit 0 done; 91 a store entry is missing or corrupt; 93 bad input.
// The store is ~/.cache/paperclip-createos-sync (0700), never inside the
// workspace; entries are written to tmp/, checked, then renamed.
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
const STORE_BYTES = 2 * 1024 * 1024 * 1024;
const LEVEL = 5;

class Exit extends Error {
  constructor(code, msg) { super(msg); this.code = code; }
}
const bad = (msg) => new Exit(93, msg);

function storeDir(workspace) {
  const home = os.homedir();
  if (!home || !path.isAbsolute(home)) return null;
  const dir = path.join(home, ".cache", "paperclip-createos-sync");
  const ws = path.resolve(workspace);
  if (dir === ws || dir.startsWith(ws + "/")) return null;
  try {
    fs.mkdirSync(path.join(dir, "tmp"), { recursive: true, mode: 0o700 });
    fs.chmodSync(dir, 0o700);
    if (fs.lstatSync(dir).isSymbolicLink()) return null;
  } catch (e) { return null; }
  sweepTmp(dir);
  return dir;
}

// sweepTmp removes temp files of helpers that are gone.
function sweepTmp(dir) {
  let names = [];
  try { names = fs.readdirSync(path.join(dir, "tmp")); } catch (e) { return; }
  for (const n of names) {
    const pid = parseInt(n, 10);
    let alive = false;
    try { process.kill(pid, 0); alive = true; } catch (e) { alive = e.code === "EPERM"; }
    if (!alive || pid === process.pid) { try { fs.unlinkSync(path.join(dir, "tmp", n)); } catch (e) {} }
  }
}

const entryPath = (dir, hex) => path.join(dir, hex.slice(0, 2), hex);

// An entry being written: bytes go to tmp/, checked on commit.
class Entry {
  constructor(dir, hex, have) {
    this.dir = dir; this.hex = hex; this.fd = -1;
    if (!dir || (have ? have.has(hex) : fs.existsSync(entryPath(dir, hex)))) return;
    this.tmp = path.join(dir, "tmp", process.pid + "-" + crypto.randomBytes(8).toString("hex"));
    try { this.fd = fs.openSync(this.tmp, "wx", 0o600); } catch (e) { this.fd = -1; }
  }
  write(buf) {
    if (this.fd < 0) return;
    try { writeAll(this.fd, buf); } catch (e) { this.abort(); }
  }
  commit(ok) {
    if (this.fd < 0) return false;
    fs.closeSync(this.fd); this.fd = -1;
    if (!ok) { try { fs.unlinkSync(this.tmp); } catch (e) {} return false; }
    try {
      fs.mkdirSync(path.join(this.dir, this.hex.slice(0, 2)), { recursive: true, mode: 0o700 });
      fs.renameSync(this.tmp, entryPath(this.dir, this.hex));
      return true;
    } catch (e) { try { fs.unlinkSync(this.tmp); } catch (e2) {} return false; }
  }
  abort() { if (this.fd >= 0) { try { fs.closeSync(this.fd); fs.unlinkSync(this.tmp); } catch (e) {} this.fd = -1; } }
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

// copyEntry appends store entry hex (n bytes) to sink; with check, it
// hashes it on the way and removes it when it is not what its name says.
// Without, only its size is checked: apply checks the whole output's hash
// and then, on a mismatch, each entry it used (verifyEntries).
function copyEntry(dir, hex, n, sink, check) {
  if (!dir) throw new Exit(91, "no store");
  const p = entryPath(dir, hex);
  let src;
  try { src = fs.openSync(p, "r"); } catch (e) { throw new Exit(91, "missing entry"); }
  try {
    if (fs.fstatSync(src).size !== n) { fs.unlinkSync(p); throw new Exit(91, "corrupt entry"); }
    const h = check ? crypto.createHash("sha256") : null;
    for (let off = 0; off < n; ) {
      const b = readAt(src, Math.min(MAX_FRAME, n - off), off);
      if (h) h.update(b);
      sink(b); off += b.length;
    }
    if (h && h.digest("hex") !== hex) { try { fs.unlinkSync(p); } catch (e) {} throw new Exit(91, "corrupt entry"); }
    const now = new Date();
    try { fs.futimesSync(src, now, now); } catch (e) {}
  } finally { fs.closeSync(src); }
}

// verifyEntries checks every entry in used, removing the bad ones; it
// reports whether one was bad.
function verifyEntries(dir, used) {
  let bad = false;
  for (const [hex, n] of used) {
    try { copyEntry(dir, hex, n, () => {}, true); } catch (e) { bad = true; }
  }
  return bad;
}

function apply(stream, outPath, workspace) {
  const dir = storeDir(workspace);
  const inFd = fs.openSync(stream, "r");
  // Read and written: a content met again in this stream is read back.
  const outFd = fs.openSync(outPath, "w+", 0o600);
  const total = crypto.createHash("sha256");
  const seen = new Map(), used = new Map();
  let pos = 0, wrote = false;
  const emit = (b) => { writeAll(outFd, b, pos); total.update(b); pos += b.length; };
  try {
    const f = new Frames(inFd);
    for (;;) {
      const kind = f.exact(1)[0];
      if (kind === 0x48) {
        let n = f.exact(4).readUInt32BE(0);
        while (n > 0) { const b = f.take(n); emit(b); n -= b.length; }
      } else if (kind === 0x43) {
        const { hash, n } = readHead(f);
        const hex = hash.toString("hex"), start = pos;
        const e = new Entry(dir, hex), h = crypto.createHash("sha256");
        for (let left = n; left > 0; ) { const b = f.take(Math.min(left, MAX_FRAME)); emit(b); h.update(b); e.write(b); left -= b.length; }
        const ok = h.digest("hex") === hex;
        wrote = e.commit(ok) || wrote;
        if (!ok) throw bad("content does not match its hash");
        seen.set(hex, [start, n]);
      } else if (kind === 0x52) {
        const { hash, n } = readHead(f);
        const hex = hash.toString("hex"), got = seen.get(hex);
        if (got && got[1] === n) {
          for (let off = 0; off < n; ) { const b = readAt(outFd, Math.min(MAX_FRAME, n - off), got[0] + off); emit(b); off += b.length; }
        } else { copyEntry(dir, hex, n, emit, false); used.set(hex, n); }
      } else if (kind === 0x45) {
        const { hash, n } = readHead(f);
        if (n !== pos || !total.digest().equals(hash)) {
          if (verifyEntries(dir, used)) throw new Exit(91, "corrupt entry");
          throw bad("output does not match the stream's end");
        }
        if (!f.atEnd()) throw bad("data after the end");
        break;
      } else throw bad("unknown record");
    }
  } catch (e) {
    fs.closeSync(outFd); fs.closeSync(inFd);
    try { fs.unlinkSync(outPath); } catch (e2) {}
    throw e;
  }
  fs.closeSync(outFd); fs.closeSync(inFd);
  if (wrote) bound(dir);
}

function index(outPath, workspace) {
  const dir = storeDir(workspace);
  const fd = fs.openSync(outPath, "w", 0o600);
  writeAll(fd, Buffer.from("PCINDEX\n"));
  for (const e of entries(dir)) writeAll(fd, Buffer.from(e.hex, "hex"));
  fs.closeSync(fd);
}

function entries(dir) {
  const out = [];
  if (!dir) return out;
  for (const sub of fs.readdirSync(dir)) {
    if (!/^[0-9a-f]{2}$/.test(sub)) continue;
    for (const hex of fs.readdirSync(path.join(dir, sub))) {
      if (!/^[0-9a-f]{64}$/.test(hex) || hex.slice(0, 2) !== sub) continue;
      try { const st = fs.statSync(path.join(dir, sub, hex)); out.push({ hex, size: st.size, mtime: st.mtimeMs }); } catch (e) {}
    }
  }
  return out;
}

// bound removes the least recently used entries past STORE_BYTES.
function bound(dir) {
  const all = entries(dir);
  let sum = all.reduce((s, e) => s + e.size, 0);
  if (sum <= STORE_BYTES) return;
  all.sort((a, b) => a.mtime - b.mtime);
  for (const e of all) {
    if (sum <= STORE_BYTES * 0.9) break;
    try { fs.unlinkSync(entryPath(dir, e.hex)); sum -= e.size; } catch (err) {}
  }
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

function storeSet(dir) {
  const have = new Set();
  for (const e of entries(dir)) have.add(e.hex);
  return have;
}

function recipe(kind, src, outPath, workspace) {
  const dir = storeDir(workspace);
  const have = storeSet(dir);
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
      else if (dir) {
        if (!spill) spill = new Entry(dir, "spill-" + off, new Set());
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
    if (!dir || have.has(hex)) { if (spill) spill.commit(false); return; }
    if (spill) {
      spill.hex = hex;
      if (spill.commit(true)) { have.add(hex); wrote = true; }
      return;
    }
    const e = new Entry(dir, hex, have);
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
  if (wrote) bound(dir);
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
  process.exit(e instanceof Exit ? e.code : 93);
}
