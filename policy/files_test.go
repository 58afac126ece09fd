package policy

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
)

func TestValidateCode(t *testing.T) {
	if err := ValidateCode("print(1)\n", 100); err != nil {
		t.Fatal(err)
	}
	err := ValidateCode(strings.Repeat("x", 101), 100)
	if !errors.Is(err, ErrCodeTooLarge) || !strings.Contains(err.Error(), "101 bytes, the limit is 100") {
		t.Fatalf("oversize: %v", err)
	}
	err = ValidateCode("print(1)\x00", 100)
	if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), "NUL byte at offset 8") {
		t.Fatalf("nul: %v", err)
	}
	if err := ValidateCode(strings.Repeat("x", DefaultMaxCodeBytes+1), 0); !errors.Is(err, ErrCodeTooLarge) {
		t.Fatalf("zero cap must mean the default cap, got %v", err)
	}
}

func TestFilesRejects(t *testing.T) {
	caps := FileCaps{MaxFiles: 3, MaxFileBytes: 10, MaxTotalBytes: 15, MaxPathLen: 40}
	f := func(p string) FileInput { return FileInput{Path: p, Content: "x"} }
	tests := []struct {
		name string
		in   []FileInput
		want string
	}{
		{"empty path", []FileInput{f("")}, "path is empty"},
		{"dot", []FileInput{f(".")}, "workspace itself"},
		{"dot slash", []FileInput{f("./")}, "workspace itself"},
		{"absolute", []FileInput{f("/etc/passwd")}, "absolute"},
		{"dotdot", []FileInput{f("../x")}, ".. component"},
		{"inner dotdot", []FileInput{f("a/../../x")}, ".. component"},
		{"dotdot that cleans inside", []FileInput{f("a/../b")}, ".. component"},
		{"nul", []FileInput{f("a\x00b")}, "NUL"},
		{"backslash", []FileInput{f(`a\b`)}, "backslash"},
		{"newline", []FileInput{f("a\nb")}, "control character"},
		{"c1 control", []FileInput{f("a\u0085b")}, "control character"},
		{"invalid utf8", []FileInput{f("a\xffb")}, "UTF-8"},
		{"long component", []FileInput{f(strings.Repeat("a", 256))}, "component is 256 bytes"},
		{"long path", []FileInput{f(strings.Repeat("a/", 20) + "b")}, "path is 41 bytes, the limit is 40"},
		{"duplicate", []FileInput{f("a.txt"), f("./a.txt")}, "same path as files[0]"},
		{"case duplicate", []FileInput{f("A.txt"), f("a.txt")}, "same path as files[0]"},
		// macOS's file systems are normalization-insensitive too: one file there.
		{"NFC and NFD", []FileInput{f("caf\u00e9.txt"), f("cafe\u0301.txt")}, "same path as files[0]"},
		{"Kelvin sign", []FileInput{f("k.txt"), f("\u212a.txt")}, "same path as files[0]"},
		{"long s", []FileInput{f("s.txt"), f("\u017f.txt")}, "same path as files[0]"},
		{"NFD directory of a file", []FileInput{f("caf\u00e9"), f("cafe\u0301/x")}, "its directory"},
		{"file and dir", []FileInput{f("a"), f("a/b")}, "its directory \"a\" is files[0]"},
		{"code file", []FileInput{f("main.py")}, "reserved for the code"},
		{"code file other case", []FileInput{f("MAIN.JS")}, "reserved for the code"},
		{"guard file", []FileInput{f(GuardFile)}, "reserved for airlock"},
		{"airlock dir", []FileInput{f(".airlock/x")}, "reserved for airlock"},
		{"too many", []FileInput{f("a"), f("b"), f("c"), f("d")}, "4 files, the limit is 3"},
		{"file too big", []FileInput{{Path: "a", Content: strings.Repeat("x", 11)}}, "\"a\": 11 bytes, the limit is 10"},
		{"base64 too big", []FileInput{{Path: "a", Encoding: "base64", Content: base64.StdEncoding.EncodeToString(make([]byte, 11))}}, "decoded, the limit is 10"},
		{"base64 far too big refused before decoding", []FileInput{{Path: "a", Encoding: "base64", Content: strings.Repeat("A", 400)}}, "about 300 bytes decoded"},
		{"total too big", []FileInput{{Path: "a", Content: "0123456789"}, {Path: "b", Content: "012345"}}, "total more than 15 bytes"},
		{"bad base64", []FileInput{{Path: "a", Encoding: "base64", Content: "!!!"}}, "bad base64"},
		{"unknown encoding", []FileInput{{Path: "a", Encoding: "hex", Content: "00"}}, "unknown encoding \"hex\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := Files(tt.in, caps)
			if err == nil {
				t.Fatalf("accepted: %+v", out)
			}
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q, want ErrInvalidRequest containing %q", err, tt.want)
			}
		})
	}
}

func TestFilesAccepts(t *testing.T) {
	in := []FileInput{
		{Path: "data.csv", Content: "a,b\n1,2\n"},
		{Path: "./dir//sub/./x.bin", Encoding: "base64", Content: base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 255})},
		{Path: ".config", Content: ""},
		{Path: "main.py.txt", Encoding: "UTF8", Content: "héllo"},
		{Path: "dir/sub/y", Content: "y"},
	}
	out, err := Files(in, FileCaps{})
	if err != nil {
		t.Fatal(err)
	}
	wantPaths := []string{"data.csv", "dir/sub/x.bin", ".config", "main.py.txt", "dir/sub/y"}
	for i, f := range out {
		if f.Path != wantPaths[i] || f.Mode != 0o644 {
			t.Errorf("files[%d] = %q mode %v, want %q 0644", i, f.Path, f.Mode, wantPaths[i])
		}
	}
	if string(out[1].Data) != "\x00\x01\x02\xff" || string(out[3].Data) != "héllo" {
		t.Fatalf("data not decoded: %q %q", out[1].Data, out[3].Data)
	}
	if out, err := Files(nil, FileCaps{}); err != nil || len(out) != 0 {
		t.Fatalf("no files: %v %v", out, err)
	}
}
