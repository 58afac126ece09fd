package metrics

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// contentType is the Prometheus text exposition format, version 0.0.4: what every
// Prometheus, the OpenTelemetry collector and HAProxy's scrapers accept, and what
// client_golang served here before (issue 24 replaced it, goal 4).
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// family is one metric family: its # HELP and # TYPE lines, then its samples, which
// write appends. Families are written sorted by name, as client_golang wrote them.
type family struct {
	name, help, typ string
	samples         func(e *exposition)
}

// exposition builds one scrape's text. Every name and label name airlock writes is a
// constant; only label values and HELP text are escaped.
type exposition struct{ b []byte }

func (e *exposition) families(fs []family) {
	slices.SortFunc(fs, func(a, b family) int { return strings.Compare(a.name, b.name) })
	for _, f := range fs {
		e.b = append(e.b, "# HELP "...)
		e.b = append(e.b, f.name...)
		e.b = append(e.b, ' ')
		e.b = appendEscaped(e.b, f.help, false)
		e.b = append(e.b, "\n# TYPE "...)
		e.b = append(e.b, f.name...)
		e.b = append(e.b, ' ')
		e.b = append(e.b, f.typ...)
		e.b = append(e.b, '\n')
		f.samples(e)
	}
}

// sample writes one line: name{labels} value. labels are name, value pairs, in the
// order given (callers give them sorted by name, as client_golang did).
func (e *exposition) sample(name string, v float64, labels ...string) {
	e.b = append(e.b, name...)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			e.b = append(e.b, '{')
		} else {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, labels[i]...)
		e.b = append(e.b, `="`...)
		e.b = appendEscaped(e.b, labels[i+1], true)
		e.b = append(e.b, '"')
	}
	if len(labels) > 0 {
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
	e.b = appendFloat(e.b, v)
	e.b = append(e.b, '\n')
}

// appendEscaped escapes per the format: in HELP a backslash and a line feed, in a label
// value the double quote too. A label value is whatever a client sent as a language
// name or a build's version string; unescaped, a quote or newline there would let it
// forge samples of its own.
func appendEscaped(b []byte, s string, quote bool) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, `\\`...)
		case c == '\n':
			b = append(b, `\n`...)
		case c == '"' && quote:
			b = append(b, `\"`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendFloat writes a value as Go's ParseFloat reads it back, with the format's
// spellings of the infinities and NaN.
func appendFloat(b []byte, v float64) []byte {
	switch {
	case math.IsInf(v, +1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
