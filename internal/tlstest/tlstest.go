// Package tlstest makes the TLS handshake messages the egress tests attack the proxy
// with: a real client's first flight (with or without an encrypted ClientHello), an ECH
// configuration, and a destination's HelloRetryRequest.
package tlstest

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"net"
	"testing"
)

// Hello is the first flight of a real TLS client for serverName: one or more handshake
// records carrying its ClientHello. With echList (an ECHConfigList) the real hello is
// encrypted inside an outer one that names the configuration's public name.
func Hello(t testing.TB, serverName string, echList []byte) []byte {
	t.Helper()
	c1, c2 := net.Pipe()
	defer c2.Close()
	go func() {
		defer c1.Close()
		cfg := &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == "", EncryptedClientHelloConfigList: echList} //nolint:gosec // only its ClientHello is used
		_ = tls.Client(c1, cfg).Handshake()
	}()
	var out []byte
	var msg []byte
	for {
		var hdr [5]byte
		if _, err := readFull(c2, hdr[:]); err != nil {
			t.Fatalf("ClientHello for %q: %v", serverName, err)
		}
		frag := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
		if _, err := readFull(c2, frag); err != nil {
			t.Fatalf("ClientHello for %q: %v", serverName, err)
		}
		out = append(append(out, hdr[:]...), frag...)
		msg = append(msg, frag...)
		if len(msg) >= 4 && len(msg) >= 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
			return out
		}
	}
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// ECHConfig is one marshalled ECHConfig (RFC 9849 §4, version 0xfe0d) for an X25519
// key, HKDF-SHA256 and AES-128-GCM, whose public_name (the outer SNI a client sends) is
// publicName; list is it as an ECHConfigList, private the key a server decrypts the
// inner ClientHello with.
func ECHConfig(t testing.TB, publicName string) (config, list, private []byte) {
	t.Helper()
	key, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	u16 := func(b []byte, v int) []byte { return binary.BigEndian.AppendUint16(b, uint16(v)) } //nolint:gosec // G115: lengths of a few dozen bytes
	pub := key.PublicKey().Bytes()
	c := []byte{7}        // config_id
	c = u16(c, 0x0020)    // DHKEM(X25519, HKDF-SHA256)
	c = u16(c, len(pub))  // public_key
	c = append(c, pub...) //
	c = u16(c, 4)         // cipher_suites: HKDF-SHA256, AES-128-GCM
	c = u16(u16(c, 0x0001), 0x0001)
	c = append(c, 0)                     // maximum_name_length
	c = append(c, byte(len(publicName))) //nolint:gosec // G115: a test name, under 256 bytes
	c = append(c, publicName...)
	c = u16(c, 0) // extensions
	config = append(u16(u16(nil, 0xfe0d), len(c)), c...)
	list = append(u16(nil, len(config)), config...)
	return config, list, key.Bytes()
}

// HelloRetryRandom is the random of a ServerHello that is a HelloRetryRequest (RFC 8446
// §4.1.3): SHA-256 of "HelloRetryRequest".
var HelloRetryRandom = []byte{
	0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
	0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
}

// HelloRetry is a HelloRetryRequest record asking for a P-256 key share (RFC 8446
// §4.1.4): what a destination sends when the first ClientHello has no share it accepts.
func HelloRetry() []byte {
	body := []byte{3, 3}
	body = append(body, HelloRetryRandom...)
	body = append(body, 0)          // legacy_session_id_echo (empty)
	body = append(body, 0x13, 0x01) // TLS_AES_128_GCM_SHA256
	body = append(body, 0)          // legacy_compression_method
	exts := []byte{0, 43, 0, 2, 3, 4, 0, 51, 0, 2, 0, 23}
	body = binary.BigEndian.AppendUint16(body, uint16(len(exts))) //nolint:gosec // G115: 12 bytes
	body = append(body, exts...)
	msg := binary.BigEndian.AppendUint32(nil, 2<<24|uint32(len(body))) //nolint:gosec // G115: under 100 bytes
	msg = append(msg, body...)
	rec := binary.BigEndian.AppendUint16([]byte{22, 3, 3}, uint16(len(msg))) //nolint:gosec // G115: under 100 bytes
	return append(rec, msg...)
}

// ChangeCipherSpec is the record a TLS 1.3 client in middlebox compatibility mode sends
// before its second flight (RFC 8446 §D.4).
var ChangeCipherSpec = []byte{20, 3, 3, 0, 1, 1}
