// Package host picks the sandbox backend for the operating system airlock runs on.
// It exists apart from package sandbox so that the backends can import sandbox's types
// without an import cycle.
package host
