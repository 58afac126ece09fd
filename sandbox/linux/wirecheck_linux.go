package linux

// The init's C codec, called in-process: the codec's tests (protocol_linux_test.go) run
// what wire_linux.c reads and writes against the Go side without starting a sandbox.
// cgo cannot be used in a _test.go file, so this lives in the package; nothing but those
// tests calls it.

/*
#include <stdlib.h>
#include "init_linux.h"

static void free_strv(char **v) {
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

// free_config frees what parse_config allocated (byte fields point into the frame).
static void free_config(struct config *c) {
	free(c->uidmap);
	free(c->gidmap);
	free(c->hostname);
	for (uint32_t i = 0; c->ops && i < c->nops; i++) {
		free(c->ops[i].source);
		free(c->ops[i].target);
		free(c->ops[i].link);
		free(c->ops[i].data);
	}
	free(c->ops);
	free(c->filter);
	free_strv(c->env);
	free_strv(c->preload);
	free(c->out_dir);
	free(c->rl);
}

static void free_handover(struct handover *h) {
	free_strv(h->argv);
	free_strv(h->tail);
	free(h->code_file);
	for (uint32_t i = 0; h->files && i < h->nfiles; i++)
		free(h->files[i].path);
	free(h->files);
	free(h->rl);
}
*/
import "C"

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"github.com/airlock-mcp/airlock/sandbox"
)

// cPayload checks a frame's length prefix as read_frame does and copies its payload
// into C memory (the caller frees it).
func cPayload(frame []byte) (unsafe.Pointer, C.size_t, error) {
	if len(frame) < 4 || binary.NativeEndian.Uint32(frame) != uint32(len(frame)-4) || len(frame)-4 > maxReport {
		return nil, 0, errors.New("bad frame length")
	}
	// Never an empty allocation, as in read_frame.
	p := C.malloc(C.size_t(len(frame) - 4 + 1))
	copy(unsafe.Slice((*byte)(p), len(frame)-4), frame[4:])
	return p, C.size_t(len(frame) - 4), nil
}

func wireError(e *C.struct_wire_error) error {
	return errors.New(C.GoString(e.stage) + ": " + C.GoString(&e.msg[0]))
}

func goStrv(v **C.char) []string {
	var out []string
	for p := v; *p != nil; p = (**C.char)(unsafe.Add(unsafe.Pointer(p), unsafe.Sizeof(p))) {
		out = append(out, C.GoString(*p))
	}
	return out
}

func goRlimits(r *C.struct_rlim, n C.uint32_t) []wireRlimit {
	out := []wireRlimit{}
	for _, l := range unsafe.Slice(r, int(n)) {
		out = append(out, wireRlimit{uint32(l.res), uint64(l.value)})
	}
	return out
}

func goBytes(p *C.uint8_t, n C.uint32_t) []byte {
	return C.GoBytes(unsafe.Pointer(p), C.int(n))
}

// cParseConfig is what the init's parse_config makes of a config frame.
func cParseConfig(frame []byte) (*wireConfig, error) {
	p, n, err := cPayload(frame)
	if err != nil {
		return nil, err
	}
	defer C.free(p)
	cur := C.struct_cur{p: (*C.uint8_t)(p), n: n}
	var c C.struct_config
	var e C.struct_wire_error
	rc := C.parse_config(&cur, &c, &e)
	defer C.free_config(&c)
	if rc != 0 {
		return nil, wireError(&e)
	}
	w := &wireConfig{
		Flags: uint32(c.flags), CloneFlags: uint32(c.clone_flags),
		HostUID: uint32(c.host_uid), HostGID: uint32(c.host_gid),
		UIDMap: C.GoString(c.uidmap), GIDMap: C.GoString(c.gidmap), Hostname: C.GoString(c.hostname),
		Filter:   C.GoBytes(unsafe.Pointer(c.filter), C.int(c.filter_len*C.sizeof_struct_sock_filter)),
		Env:      goStrv(c.env),
		Preload:  goStrv(c.preload),
		OutDir:   C.GoString(c.out_dir),
		MaxFiles: int64(c.max_files), MaxFileBytes: int64(c.max_file_bytes), MaxTotal: int64(c.max_total),
		MaxEntries: uint32(c.max_entries), MaxDepth: uint32(c.max_depth), MaxWalk: uint32(c.max_walk),
		Rlimits:   goRlimits(c.rl, c.nrl),
		ProxyPort: uint32(c.proxy_port),
	}
	for _, o := range unsafe.Slice(c.ops, int(c.nops)) {
		w.Plan = append(w.Plan, mountOp{Kind: mountKind(o.kind), IsFile: o.is_file != 0, Flags: uintptr(o.flags),
			Source: C.GoString(o.source), Target: C.GoString(o.target), Link: C.GoString(o.link),
			Data: C.GoString(o.data), Content: goBytes(o.content, o.content_len)})
	}
	return w, nil
}

// cParseHandover is what the init's parse_handover makes of a handover frame.
func cParseHandover(frame []byte) (*wireHandover, error) {
	p, n, err := cPayload(frame)
	if err != nil {
		return nil, err
	}
	defer C.free(p)
	cur := C.struct_cur{p: (*C.uint8_t)(p), n: n}
	var h C.struct_handover
	var e C.struct_wire_error
	rc := C.parse_handover(&cur, &h, &e)
	defer C.free_handover(&h)
	if rc != 0 {
		return nil, wireError(&e)
	}
	w := &wireHandover{Argv: goStrv(h.argv), Tail: goStrv(h.tail), Code: goBytes(h.code, h.code_len),
		CodeFile: C.GoString(h.code_file), Rlimits: goRlimits(h.rl, h.nrl)}
	for _, f := range unsafe.Slice(h.files, int(h.nfiles)) {
		w.Files = append(w.Files, wireFile{Path: C.GoString(f.path), Mode: uint32(f.mode), Data: goBytes(f.data, f.len)})
	}
	return w, nil
}

// artifactCode is the walker's code for an entry, and the size it sends: the code whose
// reason the entry gives, or the closing entry's with its count.
func artifactCode(a sandbox.Artifact) (byte, int64) {
	var n int
	if _, err := fmt.Sscanf(a.Skipped, "%d more entries", &n); err == nil {
		switch a.Skipped {
		case sandbox.UnlistedArtifact(n).Skipped:
			return artUnlisted, int64(n)
		case sandbox.CutArtifact(n).Skipped:
			return artCut, int64(n)
		}
	}
	for code, skip := range artifactSkips {
		if skip.Reason() == a.Skipped {
			return code, a.Size
		}
	}
	return 253, a.Size // no reason the walker gives
}

// takeFrame copies a wbuf out and frees it.
func takeFrame(f *C.struct_wbuf) []byte {
	defer C.free(unsafe.Pointer(f.p))
	return C.GoBytes(unsafe.Pointer(f.p), C.int(f.n))
}

// cExitFrame is the REP_EXIT frame the init sends for x and these artifacts (a nil
// list: the setup-only report, without a collector).
func cExitFrame(x exitInfo, arts []sandbox.Artifact) []byte {
	var exited C.int
	if x.Exited {
		exited = 1
	}
	ci := C.struct_exit_info{exited: exited, code: C.int(x.Code), signal: C.int(x.Signal),
		cpu_usec: C.int64_t(x.CPUUsec), max_rss: C.int64_t(x.MaxRSS)}
	var col *C.struct_collector
	if arts != nil {
		col = &C.struct_collector{}
		defer C.free(unsafe.Pointer(col.out.p))
		for _, a := range arts {
			code, size := artifactCode(a)
			path := C.CString(a.Path)
			var data unsafe.Pointer
			if len(a.Data) > 0 {
				data = C.CBytes(a.Data)
			}
			C.wb_artifact(&col.out, path, C.int64_t(size), C.uint8_t(code), (*C.uint8_t)(data), C.uint32_t(len(a.Data)))
			col.listed++
			C.free(unsafe.Pointer(path))
			C.free(data)
		}
	}
	var payload, f C.struct_wbuf
	C.exit_payload(&payload, &ci, col)
	C.report_frame(&f, repExit, &payload)
	C.free(unsafe.Pointer(payload.p))
	return takeFrame(&f)
}

// cErrorFrame is the REP_ERROR frame failf sends.
func cErrorFrame(stage string, errno int, msg string) []byte {
	s, m := C.CString(stage), C.CString(msg)
	defer C.free(unsafe.Pointer(s))
	defer C.free(unsafe.Pointer(m))
	var payload, f C.struct_wbuf
	C.error_payload(&payload, s, C.int(errno), m)
	C.report_frame(&f, repError, &payload)
	C.free(unsafe.Pointer(payload.p))
	return takeFrame(&f)
}

// cReportFrame is a report without a payload (REP_READY, REP_STARTED, ...).
func cReportFrame(kind byte) []byte {
	var f C.struct_wbuf
	C.report_frame(&f, C.uint8_t(kind), nil)
	return takeFrame(&f)
}
