// Package clients drives a built airlock binary with the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk), a client nobody on the project wrote, over
// stdio, Streamable HTTP and SSE. It is its own module so that the server's go.mod
// does not carry the SDK. Run it with `make clients` (or AIRLOCK_BIN=... go test ./...).
package clients
