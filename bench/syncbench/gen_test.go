package syncbench

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"strings"
	"testing"
)

// small is a repository quick enough to generate in a unit test.
var small = repoSpec{mib: 8, files: 600, seed: 7}

func TestPlanRepoIsDeterministicAndFits(t *testing.T) {
	a, b := planRepo(small), planRepo(small)
	if len(a) != small.files {
		t.Fatalf("planned %d files, want %d", len(a), small.files)
	}
	seen := map[string]bool{}
	var total int64
	kinds := map[fileKind]int{}
	for i := range a {
		if a[i].path != b[i].path || a[i].size != b[i].size || a[i].kind != b[i].kind {
			t.Fatalf("file %d differs between two plans: %+v, %+v", i, a[i], b[i])
		}
		if seen[a[i].path] {
			t.Fatalf("path %s planned twice", a[i].path)
		}
		seen[a[i].path] = true
		total += int64(a[i].size)
		kinds[a[i].kind]++
	}
	if want := small.bytes(); total < want*85/100 || total > want*105/100 {
		t.Errorf("planned %d bytes, want about %d", total, want)
	}
	for _, k := range []fileKind{sourceFile, jsonFile, markdownFile, blobFile, packedFile} {
		if kinds[k] == 0 {
			t.Errorf("no file of kind %d in %v", k, kinds)
		}
	}
}

// TestTextCompressesLikeCode holds the generated text to what real source
// does under gzip -6: 3-4x (within 2.7-4.8), and checks that every
// template was filled and every JSON file parses.
func TestTextCompressesLikeCode(t *testing.T) {
	p := newPools(small.seed)
	var raw, packed int64
	for _, f := range planRepo(small) {
		if f.kind == blobFile || f.kind == packedFile {
			continue
		}
		b := content(f, p, small.seed)
		if c := content(f, p, small.seed); !bytes.Equal(b, c) {
			t.Fatalf("%s differs between two generations", f.path)
		}
		if bytes.Contains(b, []byte("%!")) {
			t.Fatalf("%s has a template verb left unfilled: %.200s", f.path, b[bytes.Index(b, []byte("%!")):])
		}
		if f.kind == jsonFile && !json.Valid(b) {
			t.Fatalf("%s is not valid JSON: %.200s", f.path, b)
		}
		var z bytes.Buffer
		w, _ := gzip.NewWriterLevel(&z, 6)
		_, _ = w.Write(b)
		_ = w.Close()
		raw += int64(len(b))
		packed += int64(z.Len())
	}
	ratio := float64(raw) / float64(packed)
	t.Logf("text: %d bytes, gzip -6 %d bytes, %.2fx", raw, packed, ratio)
	if ratio < 2.7 || ratio > 4.8 {
		t.Errorf("text compresses %.2fx, want 3-4x like source code", ratio)
	}
}

func TestTextFilesLeaveVendorOut(t *testing.T) {
	for _, f := range textFiles(planRepo(small)) {
		if f.kind != sourceFile || strings.HasPrefix(f.path, "vendor/") {
			t.Fatalf("%s (kind %d) is editable", f.path, f.kind)
		}
	}
}
