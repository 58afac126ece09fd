package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// eraCompat smooths two edges of mcp-go's dual-era Streamable HTTP that official clients
// hit. mcp-go treats a POST as 2026-07-28 (modern) when its MCP-Protocol-Version header
// says so, and then wants the version in the body's _meta too:
//   - Notifications: the Go SDK (v1.8.0) sends notifications/cancelled (and
//     notifications/initialized) with the header but no _meta; mcp-go answers 400, and
//     the SDK closes its session on that. The header states the version already, so
//     the _meta field is filled in from it.
//   - initialize: it only exists in the handshake era and is always negotiated down to
//     2025-11-25 (mcp-go caps it there). With a modern header it was refused as a
//     modern request missing _meta, so a client asking for 2026-07-28 by initialize got
//     an error instead of the answer a client without the header gets. The header is
//     dropped: the handshake then answers 2025-11-25, which is what the server then
//     accepts from that session.
//
// Requests (with an id) other than initialize are left alone: they must carry _meta.
//
// It runs before calls, which must see the message as mcp-go will: an initialize
// whose header was dropped is a handshake that issues a session, to be claimed by its
// client and counted against the cap like any other.
func eraCompat(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		version := r.Header.Get(mcp.HeaderProtocolVersion)
		b, ok := r.Body.(body)
		if r.Method != http.MethodPost || !mcp.IsModernProtocol(version) || !ok {
			next.ServeHTTP(w, r)
			return
		}
		raw := b.raw
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(raw, &m) == nil && m.Params.Meta[mcp.MetaKeyProtocolVersion] == nil {
			switch {
			case m.Method == string(mcp.MethodInitialize):
				r.Header.Del(mcp.HeaderProtocolVersion)
			case m.Method != "" && len(m.ID) == 0:
				raw = withMetaVersion(raw, version)
			}
		}
		r.Body = body{bytes.NewReader(raw), raw}
		r.ContentLength = int64(len(raw))
		next.ServeHTTP(w, r)
	})
}

// withMetaVersion sets params._meta's protocol version in a notification, keeping
// every other field as sent.
func withMetaVersion(body []byte, version string) []byte {
	var msg map[string]json.RawMessage
	if json.Unmarshal(body, &msg) != nil {
		return body
	}
	params := map[string]json.RawMessage{}
	if p, ok := msg["params"]; ok && json.Unmarshal(p, &params) != nil {
		return body
	}
	meta := map[string]json.RawMessage{}
	if mt, ok := params["_meta"]; ok && json.Unmarshal(mt, &meta) != nil {
		return body
	}
	v, _ := json.Marshal(version)
	meta[mcp.MetaKeyProtocolVersion] = v
	params["_meta"], _ = json.Marshal(meta)
	msg["params"], _ = json.Marshal(params)
	out, err := json.Marshal(msg)
	if err != nil {
		return body
	}
	return out
}

// tooLarge refuses a POST body over the limit so that the client can match the refusal
// to its request. A bare 413 is fatal to the Go SDK's session (it closes the
// connection on an HTTP error unless the body is a JSON-RPC error), and on SSE, where
// every answer travels on the event stream, any non-2xx POST is. So the request's id is
// looked for in the body (read, not kept, up to 4x the limit) and, when found, the error
// is a JSON-RPC error with that id: on the SSE stream (202 to the POST) or as the 413's
// body. Without an id (a notification, or none within the bound) it is a plain 413.
// read is what has been read of the body already. On the stream the error takes its
// id's place among streams' answers awaited, as any answer there does (see sseAnswers):
// else it would give back the hold of a call in flight under that id.
func tooLarge(w http.ResponseWriter, r *http.Request, limit int64, sse *server.SSEServer, streams *sseStreams, read []byte) {
	ids := &idScanner{}
	_, _ = ids.Write(read)
	rest := io.LimitReader(r.Body, 3*limit)
	buf := make([]byte, 64<<10)
	for !ids.settled() {
		n, err := rest.Read(buf)
		_, _ = ids.Write(buf[:n])
		if err != nil {
			break
		}
	}
	msg := fmt.Sprintf("request body over %d bytes", limit)
	id := ids.ID()
	if id == nil {
		http.Error(w, msg, http.StatusRequestEntityTooLarge)
		return
	}
	resp := errorResponse(id, mcp.INVALID_REQUEST, "message too large: "+msg)
	if sse != nil && onStream(r.URL.Query().Get("sessionId"), id, resp, sse, streams) {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusRequestEntityTooLarge)
	_ = json.NewEncoder(w).Encode(resp)
}

// onStream puts tooLarge's error resp, for the request id, on stream sid, and reports
// whether it did. It does not while a request with that id is in flight there.
func onStream(sid string, id json.RawMessage, resp any, sse *server.SSEServer, streams *sseStreams) bool {
	if sid == "" {
		return false
	}
	key, ok := answerKey(id)
	answers := streams.answersOf(sid)
	if !ok || answers == nil {
		// An id no request can hold (1e700 decodes to no float64) releases nothing.
		return sse.SendEventToSession(sid, resp) == nil
	}
	rel := &release{}
	if !answers.hold(key, rel) {
		return false
	}
	if sse.SendEventToSession(sid, resp) != nil {
		answers.drop(key, rel)
		return false
	}
	return true
}
