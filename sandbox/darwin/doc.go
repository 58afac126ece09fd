// Package darwin is airlock's macOS sandbox: a deny-by-default Seatbelt (SBPL) profile run
// by /usr/bin/sandbox-exec, rlimits, and process-group kill.
package darwin
