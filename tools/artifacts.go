package tools

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	_ "image/gif" // registers the decoders DecodeConfig checks headers with
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"net/url"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/airlock-mcp/airlock/sandbox"
	"github.com/airlock-mcp/airlock/sanitize"
)

// Artifact describes one file the program left in the output directory, returned or not.
type Artifact struct {
	Path     string `json:"path" jsonschema:"description=Path relative to the output directory. Invisible characters (controls; line breaks; BiDi and zero-width characters) and backslashes appear as Go escapes (a line feed as backslash-n; U+202E as backslash-u202e)."`
	Size     int64  `json:"size"`
	MIMEType string `json:"mime_type,omitempty"`
	SHA256   string `json:"sha256,omitempty" jsonschema:"description=SHA-256 of the file as the program wrote it."`
	Returned bool   `json:"returned" jsonschema:"description=Whether the file is in the result's content."`
	Skipped  string `json:"skipped,omitempty" jsonschema:"description=Why the file was not returned."`
	URI      string `json:"uri,omitempty" jsonschema:"description=URI of the embedded resource or empty for images and skipped files."`
}

// maxImageSide is the largest width or height returned as image content. A header
// claiming more is more likely a decompression bomb than a plot, and several model
// APIs refuse such images and fail the whole turn with them; it comes back as a blob.
const maxImageSide = 8192

// artifactContent turns the run's artifacts into MCP content and lists every one of
// them. Raster images (by their magic bytes, never by name alone) become image content;
// valid UTF-8 text becomes a text resource, sanitized like stdout because the model reads
// it; anything else becomes a base64 blob resource, never altered. An SVG is text: as
// image content a client would render it, running its scripts and fetching its external
// references, an egress path around the sandbox's network isolation; its source as a
// text/plain resource is inert, and so are HTML, XML and PDF (see active). File names are escaped (sanitize.Escape): the program
// chose them, and a line break or BiDi control in one would forge the listing.
// The content costs at most wireBudget(maxTotal) bytes in the result's JSON: a file past
// it is listed, not returned.
func artifactContent(id, outDir string, arts []sandbox.Artifact, maxTotal int64) ([]mcp.Content, []Artifact) {
	return artifacts(id, outDir, arts, wireBudget(maxTotal))
}

// artifactList lists the artifacts without encoding any content.
func artifactList(id, outDir string, arts []sandbox.Artifact) []Artifact {
	_, list := artifacts(id, outDir, arts, -1)
	return list
}

// wireBudget is what the returned content may cost as JSON: the artifact cap as base64,
// which is what images and blobs cost. Text costs more where JSON escapes it: '<', '>'
// and '&' (json.Marshal's HTML-safe form, which mcp-go's HTTP transport writes too) and
// U+2028/U+2029 take six bytes each, a line feed or quote two. A program's 16 MiB of '<'
// (the default cap) was 96 MiB on the wire and 515 MB of the server's memory for one call.
func wireBudget(maxTotal int64) int64 { return (maxTotal + 2) / 3 * 4 }

// jsonLen is how many bytes encoding/json writes for s, valid UTF-8, inside its quotes.
func jsonLen(s string) int64 {
	n := int64(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		n += int64(jsonExtra[c])
		if c == 0xe2 && i+2 < len(s) && s[i+1] == 0x80 && (s[i+2] == 0xa8 || s[i+2] == 0xa9) {
			n += 3 // U+2028 and U+2029: three bytes, \u2028 six
		}
	}
	return n
}

// jsonExtra is what encoding/json adds to one byte: \u003c for '<', '>' and '&' (its
// HTML-safe form), \" \\ \n \r \t \b \f, and \u00XX for the other controls. A table:
// jsonLen runs over every stream of every answer.
var jsonExtra = func() (t [256]int8) {
	for c := 0; c < 0x20; c++ {
		t[c] = 5
	}
	for _, c := range "<>&" {
		t[c] = 5
	}
	for _, c := range "\"\\\n\r\t\b\f" {
		t[c] = 1
	}
	return t
}()

// artifacts lists arts and, where budget >= 0, encodes their content within budget bytes
// of JSON.
func artifacts(id, outDir string, arts []sandbox.Artifact, budget int64) ([]mcp.Content, []Artifact) {
	var content []mcp.Content
	withContent := budget >= 0
	list := make([]Artifact, 0, len(arts))
	for _, a := range arts {
		info := Artifact{Path: sanitize.Escape(a.Path), Size: a.Size, SHA256: a.SHA256, Skipped: a.Skipped}
		// An empty file comes back without data, like a skipped one, but with a hash.
		if a.Skipped != "" || a.Data == nil && (a.Size > 0 || a.SHA256 == "") {
			if info.Skipped == "" {
				info.Skipped = "not returned by the sandbox"
			}
			list = append(list, info)
			continue
		}
		kind, mime := classify(a.Path, a.Data)
		var text string
		if withContent {
			cost := int64(base64.StdEncoding.EncodedLen(len(a.Data)))
			if kind == kindText || kind == kindSVG {
				text = sanitize.String(string(a.Data))
				cost = jsonLen(text)
			}
			if cost > budget {
				info.Skipped = fmt.Sprintf("%s (%d bytes as JSON, %d left)", sandbox.SkipTotalCap.Reason(), cost, budget)
				list = append(list, info)
				continue
			}
			budget -= cost
		}
		info.MIMEType, info.Returned = mime, true
		if kind != kindImage {
			info.URI = artifactURI(id, outDir, a.Path)
		}
		list = append(list, info)
		if !withContent {
			continue
		}
		switch kind {
		case kindImage:
			content = append(content, mcp.NewImageContent(base64.StdEncoding.EncodeToString(a.Data), mime))
		case kindText, kindSVG:
			if kind == kindSVG || active[mime] {
				mime = "text/plain"
			}
			content = append(content, mcp.NewEmbeddedResource(mcp.TextResourceContents{
				URI: info.URI, MIMEType: mime, Text: text}))
		default:
			if active[mime] {
				mime = "application/octet-stream"
			}
			content = append(content, mcp.NewEmbeddedResource(mcp.BlobResourceContents{
				URI: info.URI, MIMEType: mime, Blob: base64.StdEncoding.EncodeToString(a.Data)}))
		}
	}
	return content, list
}

// artifactURI names an artifact airlock://run/<id>/<outDir>/<path>, each segment
// escaped: the program chose the name.
func artifactURI(id, outDir, p string) string {
	segs := strings.Split(path.Join(outDir, p), "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "airlock://run/" + url.PathEscape(id) + "/" + strings.Join(segs, "/")
}

type kind int

const (
	kindBlob kind = iota
	kindText
	kindImage
	kindSVG // text, listed as image/svg+xml, returned as text/plain source
)

// classify decides how an artifact is returned, and its MIME type, from its bytes first.
func classify(name string, data []byte) (kind, string) {
	if mime := imageMagic(data); mime != "" {
		if imageFits(mime, data) {
			return kindImage, mime
		}
		return kindBlob, mime
	}
	sniffed := baseType(http.DetectContentType(data))
	// DetectContentType calls text with escape sequences (a coloured log) binary; valid
	// UTF-8 without NUL bytes is text unless a binary signature matched.
	plain := strings.HasPrefix(sniffed, "text/") || sniffed == "application/octet-stream"
	if !plain || !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return kindBlob, sniffed
	}
	if !strings.HasPrefix(sniffed, "text/") {
		sniffed = "text/plain"
	}
	ext := strings.ToLower(path.Ext(name))
	if ext == ".svg" && looksLikeSVG(data) {
		return kindSVG, "image/svg+xml"
	}
	if mime, ok := textTypes[ext]; ok {
		return kindText, mime
	}
	return kindText, sniffed
}

// textTypes are the MIME types of common text outputs; the host's mime.types is not
// used, so the answer does not depend on the machine.
var textTypes = map[string]string{
	".txt": "text/plain", ".log": "text/plain", ".csv": "text/csv", ".tsv": "text/tab-separated-values",
	".json": "application/json", ".jsonl": "application/jsonl", ".md": "text/markdown", ".html": "text/html",
	".htm": "text/html", ".xml": "application/xml", ".yaml": "application/yaml", ".yml": "application/yaml",
	".toml": "application/toml", ".py": "text/x-python", ".js": "text/javascript", ".sh": "text/x-shellscript",
	".css": "text/css", ".svg": "text/plain", // an .svg that is not an SVG document
}

// active are the types a client would render as a document that runs scripts or fetches
// external references (HTML, XML with an XHTML or SVG namespace or a stylesheet, PDF),
// which, like an SVG image, is an egress path around the sandbox's network isolation.
// The listing keeps the type; the content carries the bytes as inert text/plain, or as
// application/octet-stream when they are not valid UTF-8 (HTML with one stray byte).
var active = map[string]bool{
	"text/html": true, "application/xhtml+xml": true, "text/xml": true, "application/xml": true,
	"image/svg+xml": true, "application/pdf": true, "application/postscript": true,
}

func baseType(mime string) string {
	t, _, _ := strings.Cut(mime, ";")
	return strings.TrimSpace(t)
}

// imageMagic recognises the raster formats models accept by their signatures.
func imageMagic(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 16 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" &&
		(string(b[12:16]) == "VP8 " || string(b[12:16]) == "VP8L" || string(b[12:16]) == "VP8X"):
		return "image/webp"
	}
	return ""
}

// imageFits parses the header only (never the pixels, which could be a decompression
// bomb) and checks the dimensions.
func imageFits(mime string, data []byte) bool {
	w, h := 0, 0
	if mime == "image/webp" {
		w, h = webpSize(data)
	} else if cfg, _, err := image.DecodeConfig(bytes.NewReader(data)); err == nil {
		w, h = cfg.Width, cfg.Height
	}
	return w > 0 && h > 0 && w <= maxImageSide && h <= maxImageSide
}

// webpSize reads a WebP's canvas size from its first chunk (the standard library has no
// WebP decoder): VP8X stores width-1 and height-1 in 24 bits each, VP8L in 14 bits after
// its 0x2f signature, VP8 in 14 bits after its key frame's start code. 0, 0 when the
// header is not one of those.
func webpSize(b []byte) (int, int) {
	le24 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 }
	switch string(b[12:16]) {
	case "VP8X":
		if len(b) >= 30 {
			return le24(b[24:]) + 1, le24(b[27:]) + 1
		}
	case "VP8L":
		if len(b) >= 25 && b[20] == 0x2f {
			v := int(b[21]) | int(b[22])<<8 | int(b[23])<<16 | int(b[24])<<24
			return v&0x3fff + 1, (v>>14)&0x3fff + 1
		}
	case "VP8 ":
		if len(b) >= 30 && string(b[23:26]) == "\x9d\x01\x2a" {
			return (int(b[26]) | int(b[27])<<8) & 0x3fff, (int(b[28]) | int(b[29])<<8) & 0x3fff
		}
	}
	return 0, 0
}

// looksLikeSVG accepts a document whose first element is <svg, after an optional XML
// declaration, doctype and comments.
func looksLikeSVG(b []byte) bool {
	s := strings.TrimSpace(string(b[:min(len(b), 4096)]))
	for {
		switch {
		case strings.HasPrefix(s, "<?"):
			_, rest, ok := strings.Cut(s, "?>")
			if !ok {
				return false
			}
			s = strings.TrimSpace(rest)
		case strings.HasPrefix(s, "<!--"):
			_, rest, ok := strings.Cut(s, "-->")
			if !ok {
				return false
			}
			s = strings.TrimSpace(rest)
		case strings.HasPrefix(s, "<!"):
			_, rest, ok := strings.Cut(s, ">")
			if !ok {
				return false
			}
			s = strings.TrimSpace(rest)
		default:
			return strings.HasPrefix(s, "<svg") && len(s) > 4 && strings.ContainsRune(" \t\r\n>/", rune(s[4]))
		}
	}
}

// renderArtifacts is the artifacts part of the text block.
func renderArtifacts(b *strings.Builder, outDir string, list []Artifact) {
	if len(list) == 0 {
		return
	}
	returned := 0
	for _, a := range list {
		if a.Returned {
			returned++
		}
	}
	fmt.Fprintf(b, "\n--- %s/ (%d files, %d returned) ---", outDir, len(list), returned)
	for _, a := range list {
		name := quoteEscaped(a.Path)
		if a.Returned {
			fmt.Fprintf(b, "\n%s (%s, %d bytes)", name, a.MIMEType, a.Size)
		} else {
			fmt.Fprintf(b, "\n%s (%d bytes, not returned: %s)", name, a.Size, sanitize.String(a.Skipped))
		}
	}
}

// quoteEscaped quotes a string sanitize.Escape made (the structured result's form of a
// program-chosen name) for the text block: with '"' escaped too it is sanitize.Quote of
// the original, so where the name ends is unambiguous.
func quoteEscaped(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
