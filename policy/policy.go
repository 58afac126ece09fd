// Package policy holds airlock's rules as pure data and functions: which languages exist
// and are enabled, how a call's requested limits are clamped to the operator's maximums,
// how a call's code and input files are validated, and the advisory Python import policy.
// It makes no OS calls except interpreter discovery at startup (Detect).
package policy

import "errors"

var (
	// ErrLanguageNotEnabled: the operator did not enable the language.
	ErrLanguageNotEnabled = errors.New("language not enabled")
	// ErrLanguageNotInstalled: enabled, but no real interpreter binary was found.
	ErrLanguageNotInstalled = errors.New("language not installed")
	// ErrCodeTooLarge: code over the configured size cap.
	ErrCodeTooLarge = errors.New("code too large")
	// ErrInvalidRequest: any other bad argument (bad file path, bad limit).
	ErrInvalidRequest = errors.New("invalid request")
)
