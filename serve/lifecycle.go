package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// errNotInitialized refuses a request sent before the handshake on a transport that
// has one.
var errNotInitialized = errors.New("the session is not initialized: send initialize first " +
	"(only ping and server/discover may come before it), or a 2026-07-28 request with its _meta")

// beforeInitialize refuses, on a session that has not been through initialize, every
// handshake-era request but initialize, ping and server/discover. The lifecycle makes
// initialize the first interaction and the official SDKs (Go, Python) refuse the rest
// before it; mcp-go runs them, so a stdio or SSE client that skipped the handshake ran
// code over a session with no negotiated version. Streamable HTTP already needs the
// session id initialize issues, and a stateless server or a 2026-07-28 request has no
// handshake: both pass.
func beforeInitialize(ctx context.Context, _ any, message any) error {
	sess := server.ClientSessionFromContext(ctx)
	if sess == nil || sess.Initialized() {
		return nil
	}
	raw, ok := message.(json.RawMessage)
	if !ok {
		return nil
	}
	var m struct {
		Method string `json:"method"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil // mcp-go answers the parse error
	}
	switch mcp.MCPMethod(m.Method) {
	case mcp.MethodInitialize, mcp.MethodPing, mcp.MethodServerDiscover:
		return nil
	}
	if mcp.IsModernProtocol(m.Params.Meta.ProtocolVersion()) {
		return nil
	}
	return errNotInitialized
}

// badEnvelope says why a JSON-RPC message is refused before anything reads it, or "":
//   - a batch (an array): 2025-06-18 removed them and mcp-go reads none, which it then
//     answered as a parse error (stdio) or a member of the wrong type (HTTP);
//   - a request whose id is not a string or a number: MCP forbids null (JSON-RPC
//     discourages it), and mcp-go took an id of null for a notification, so a tools/call
//     with one got no answer at all (202 on HTTP) and its client waited for its own
//     timeout; true, an object or an array were echoed as ids.
//
// Both get an Invalid Request error with a null id: an id that is not one cannot be
// carried back (JSON-RPC 2.0 §5).
func badEnvelope(msg []byte, id json.RawMessage, method string) string {
	if t := bytes.TrimLeft(msg, " \t\r\n"); len(t) > 0 && t[0] == '[' {
		return "batches are not supported (MCP 2025-06-18 removed them): send each message on its own"
	}
	id = bytes.TrimSpace(id)
	if method == "" || len(id) == 0 {
		return ""
	}
	switch c := id[0]; {
	case c == '"', c == '-', c >= '0' && c <= '9':
		return ""
	}
	return "invalid request: the id must be a string or a number, not " + string(clipID(id))
}

// clipID keeps an error message about an id short.
func clipID(id []byte) []byte {
	if len(id) > 32 {
		return append(id[:32:32], "…"...)
	}
	return id
}

// maxProgressToken bounds a request's progress token, in bytes as sent. Every progress
// notification of the call carries it back, one a second: an 8 MB token on a 5 s call
// came back as 40 MB of stdout, and a call of the longest timeout multiplies it by
// hundreds. SDKs send a counter or a short id.
const maxProgressToken = 256

// tokenError refuses a progress token of n bytes, or is "".
func tokenError(n int) string {
	if n <= maxProgressToken {
		return ""
	}
	return "params._meta.progressToken is " + strconv.Itoa(n) + " bytes, over the " + strconv.Itoa(maxProgressToken) +
		" allowed: every progress notification carries it back"
}
