package egress

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The TLS record and handshake layouts (RFC 8446 §5.1, §4.1.2) this file reads.
const (
	recordHandshake    = 22
	handshakeHello     = 1
	extServerName      = 0
	maxRecord          = 16384 + 2048 // a TLSCiphertext's largest fragment
	maxClientHello     = 64 << 10     // post-quantum key shares make ~2 KiB; 64 KiB is generous
	recordHeaderLength = 5
)

var errMalformedHello = errors.New("malformed ClientHello")

// isTLS reports whether a tunnel's first byte starts a TLS handshake record.
func isTLS(first byte) bool { return first == recordHandshake }

// otherRecordFirst reports whether a tunnel starts with a TLS record that is not a
// handshake one (change_cipher_spec 20, alert 21, application_data 23, heartbeat 24;
// major version 3). A TLS client never sends one before its ClientHello, but OpenSSL
// servers skip warning alerts there: the ClientHello behind one would pass unchecked.
func otherRecordFirst(b []byte) bool {
	return len(b) > 0 && b[0] >= 20 && b[0] <= 24 && b[0] != recordHandshake && (len(b) < 2 || b[1] == 3)
}

// readClientHello reads the records that carry a whole ClientHello from r. raw is every
// byte read, to forward unchanged once the hello is accepted; hello is the handshake
// message's body.
func readClientHello(r *bufio.Reader) (raw, hello []byte, err error) {
	var msg []byte
	for {
		hdr := make([]byte, recordHeaderLength)
		if _, err := io.ReadFull(r, hdr); err != nil {
			return raw, nil, fmt.Errorf("%w: record header: %w", errMalformedHello, err)
		}
		raw = append(raw, hdr...)
		n := int(binary.BigEndian.Uint16(hdr[3:]))
		if hdr[0] != recordHandshake || n == 0 || n > maxRecord {
			return raw, nil, fmt.Errorf("%w: record of type %d, %d bytes", errMalformedHello, hdr[0], n)
		}
		frag := make([]byte, n)
		if _, err := io.ReadFull(r, frag); err != nil {
			return raw, nil, fmt.Errorf("%w: record: %w", errMalformedHello, err)
		}
		raw = append(raw, frag...)
		msg = append(msg, frag...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != handshakeHello {
			return raw, nil, fmt.Errorf("%w: handshake message %d first", errMalformedHello, msg[0])
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxClientHello {
			return raw, nil, fmt.Errorf("%w: %d bytes", errMalformedHello, size)
		}
		if len(msg) >= 4+size {
			return raw, msg[4 : 4+size], nil
		}
	}
}

// reader is a bounds-checked cursor over a message.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) take(n int) []byte {
	if r.bad || n < 0 || len(r.b) < n {
		r.bad = true
		return nil
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *reader) u8() int {
	if p := r.take(1); p != nil {
		return int(p[0])
	}
	return 0
}

func (r *reader) u16() int {
	if p := r.take(2); p != nil {
		return int(binary.BigEndian.Uint16(p))
	}
	return 0
}

// helloSNI returns the host_name of a ClientHello body's server_name extension, or ""
// when it has none.
func helloSNI(hello []byte) (string, error) {
	r := &reader{b: hello}
	r.take(2 + 32)  // legacy_version, random
	r.take(r.u8())  // legacy_session_id
	r.take(r.u16()) // cipher_suites
	r.take(r.u8())  // legacy_compression_methods
	if r.bad {
		return "", errMalformedHello
	}
	if len(r.b) == 0 {
		return "", nil // no extensions at all (TLS 1.0 style)
	}
	exts := &reader{b: r.take(r.u16())}
	if r.bad || len(r.b) != 0 {
		return "", errMalformedHello
	}
	name, seen := "", false
	for len(exts.b) > 0 && !exts.bad {
		typ := exts.u16()
		data := exts.take(exts.u16())
		if exts.bad {
			break
		}
		if typ != extServerName {
			continue
		}
		if seen {
			return "", fmt.Errorf("%w: two server_name extensions", errMalformedHello)
		}
		seen = true
		list := &reader{b: data}
		entries := &reader{b: list.take(list.u16())}
		if list.bad || len(list.b) != 0 {
			return "", errMalformedHello
		}
		for len(entries.b) > 0 && !entries.bad {
			kind := entries.u8()
			v := entries.take(entries.u16())
			if kind == 0 && !entries.bad {
				if name != "" {
					return "", fmt.Errorf("%w: two host names", errMalformedHello)
				}
				name = string(v)
			}
		}
		if entries.bad {
			return "", errMalformedHello
		}
	}
	if exts.bad {
		return "", errMalformedHello
	}
	return name, nil
}
