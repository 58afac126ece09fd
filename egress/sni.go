package egress

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The TLS record and handshake layouts (RFC 8446 §5.1, §4.1.2) this file reads.
const (
	recordChangeCipher   = 20
	recordAlert          = 21
	recordHandshake      = 22
	recordAppData        = 23
	alertFatal           = 2
	handshakeHello       = 1
	handshakeServerHello = 2
	extServerName        = 0
	// extECH is encrypted_client_hello (RFC 9849), extESNI the draft's encrypted_server_name
	// before it: both carry a server name the proxy cannot read.
	extECH             = 0xfe0d
	extESNI            = 0xffce
	maxRecord          = 16384 + 2048 // a TLSCiphertext's largest fragment
	maxClientHello     = 64 << 10     // post-quantum key shares make ~2 KiB; 64 KiB is generous
	recordHeaderLength = 5
)

var (
	errMalformedHello = errors.New("malformed ClientHello")
	// errHiddenName is a ClientHello whose real server name is encrypted (ECH, ESNI): the
	// outer SNI may name an allowed host while a shared front end serves the inner one.
	errHiddenName = errors.New("ClientHello encrypts its server name (ECH)")
)

// isTLS reports whether a tunnel's first byte starts a TLS handshake record.
func isTLS(first byte) bool { return first == recordHandshake }

// otherRecordFirst reports whether a tunnel starts with a TLS record that is not a
// handshake one (change_cipher_spec 20, alert 21, application_data 23, heartbeat 24;
// major version 3). A TLS client never sends one before its ClientHello, but OpenSSL
// servers skip warning alerts there: the ClientHello behind one would pass unchecked.
func otherRecordFirst(b []byte) bool {
	return len(b) > 0 && b[0] >= 20 && b[0] <= 24 && b[0] != recordHandshake && (len(b) < 2 || b[1] == 3)
}

// readRecord reads one TLS record from r without reading past it: its header and its
// fragment (neither empty nor larger than a record may be).
func readRecord(r io.Reader) (hdr, frag []byte, err error) {
	hdr = make([]byte, recordHeaderLength)
	if n, err := io.ReadFull(r, hdr); err != nil {
		return hdr[:n], nil, fmt.Errorf("record header: %w", err)
	}
	n := int(binary.BigEndian.Uint16(hdr[3:]))
	if n == 0 || n > maxRecord {
		return hdr, nil, fmt.Errorf("record of type %d, %d bytes", hdr[0], n)
	}
	frag = make([]byte, n)
	if m, err := io.ReadFull(r, frag); err != nil {
		return hdr, frag[:m], fmt.Errorf("record: %w", err)
	}
	return hdr, frag, nil
}

// readHandshake reads the handshake records that carry one whole handshake message of
// type want from r. raw is every byte read, to forward unchanged once the message is
// accepted; body is the message's; rest is what its last record carries after it.
func readHandshake(r io.Reader, want byte) (raw, body, rest []byte, err error) {
	var msg []byte
	for {
		hdr, frag, err := readRecord(r)
		raw = append(append(raw, hdr...), frag...)
		if err != nil {
			return raw, nil, nil, err
		}
		if hdr[0] != recordHandshake {
			return raw, nil, nil, fmt.Errorf("record of type %d inside a handshake message", hdr[0])
		}
		msg = append(msg, frag...)
		if len(msg) < 4 {
			continue
		}
		if msg[0] != want {
			return raw, nil, nil, fmt.Errorf("handshake message %d first, want %d", msg[0], want)
		}
		size := int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3])
		if size > maxClientHello {
			return raw, nil, nil, fmt.Errorf("handshake message of %d bytes", size)
		}
		if len(msg) >= 4+size {
			return raw, msg[4 : 4+size], msg[4+size:], nil
		}
	}
}

// readClientHello reads the records that carry a whole ClientHello from r. raw is every
// byte read, to forward unchanged once the hello is accepted; hello is the handshake
// message's body. A record that carries more than the hello is refused: a client sends
// nothing after it before the server answers, and a server that answers with a
// HelloRetryRequest would take a second ClientHello hidden there for the one it asked.
func readClientHello(r io.Reader) (raw, hello []byte, err error) {
	raw, hello, rest, err := readHandshake(r, handshakeHello)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%d bytes after the ClientHello in its record", len(rest))
	}
	if err != nil {
		return raw, nil, fmt.Errorf("%w: %w", errMalformedHello, err)
	}
	return raw, hello, nil
}

// helloRetryRandom is the random of a ServerHello that is a HelloRetryRequest
// (RFC 8446 §4.1.3): SHA-256 of "HelloRetryRequest".
var helloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// maxServerAlerts bounds the warning alerts a destination may send before its
// ServerHello (OpenSSL servers may warn unrecognized_name there).
const maxServerAlerts = 4

// readServerHello reads a destination's answer to a ClientHello up to the end of its
// first handshake message, which must be a ServerHello. raw is every byte read; retry
// says the ServerHello is a HelloRetryRequest, which the client answers with a second
// ClientHello in the clear; ended says a fatal alert came first, which ends the
// handshake.
func readServerHello(r io.Reader) (raw []byte, retry, ended bool, err error) {
	for range maxServerAlerts {
		var b [1]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return raw, false, false, fmt.Errorf("server hello: %w", err)
		}
		r := io.MultiReader(bytes.NewReader(b[:]), r)
		if b[0] != recordAlert {
			more, body, _, err := readHandshake(r, handshakeServerHello)
			raw = append(raw, more...)
			if err != nil {
				return raw, false, false, fmt.Errorf("server hello: %w", err)
			}
			return raw, len(body) >= 34 && bytes.Equal(body[2:34], helloRetryRandom), false, nil
		}
		hdr, frag, err := readRecord(r)
		raw = append(append(raw, hdr...), frag...)
		if err != nil {
			return raw, false, false, fmt.Errorf("server alert: %w", err)
		}
		if frag[0] == alertFatal {
			return raw, false, true, nil
		}
	}
	return raw, false, false, fmt.Errorf("server hello: more than %d alerts first", maxServerAlerts)
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
		if typ == extECH || typ == extESNI {
			return "", errHiddenName
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
