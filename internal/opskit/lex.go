package opskit

import (
	"fmt"
	"strconv"
	"strings"
)

type tokenKind int

const (
	tokNone tokenKind = iota
	tokIdent
	tokNumber // numbers and durations: 0.95, 5m, 1h30m, 1e3
	tokString // the unquoted value
	tokVariable
	tokPunct // ( ) { } [ ] ,
	tokOp
)

type token struct {
	kind tokenKind
	text string
	pos  int
}

func (t token) is(punct string) bool { return t.kind == tokPunct && t.text == punct }

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lex splits a PromQL expression (with Grafana's variables) into tokens.
func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			text, n, err := lexString(s[i:])
			if err != nil {
				return nil, fmt.Errorf("offset %d: %w", i, err)
			}
			out = append(out, token{tokString, text, i})
			i += n
		case c == '$':
			n := lexVariable(s[i:])
			out = append(out, token{tokVariable, s[i : i+n], i})
			i += n
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			j := i
			for j < len(s) && (isIdentChar(s[j]) || s[j] == '.' ||
				((s[j] == '+' || s[j] == '-') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(s[i:], "0x"))) {
				j++
			}
			out = append(out, token{tokNumber, s[i:j], i})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(s) && isIdentChar(s[j]) {
				j++
			}
			out = append(out, token{tokIdent, s[i:j], i})
			i = j
		case strings.ContainsRune("(){}[],", rune(c)):
			out = append(out, token{tokPunct, string(c), i})
			i++
		default:
			n := lexOp(s[i:])
			if n == 0 {
				return nil, fmt.Errorf("offset %d: unexpected %q", i, c)
			}
			out = append(out, token{tokOp, s[i : i+n], i})
			i += n
		}
	}
	return out, nil
}

// lexString reads the string literal at the start of s: its value and
// its length in s.
func lexString(s string) (string, int, error) {
	q := s[0]
	for j := 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			if q == '`' {
				return s[1:j], j + 1, nil
			}
			v, err := strconv.Unquote(`"` + strings.ReplaceAll(s[1:j], `"`, `\"`) + `"`)
			if err != nil {
				v = s[1:j] // PromQL's escapes are Go's; a value that Go rejects is kept as written
			}
			return v, j + 1, nil
		}
	}
	return "", 0, fmt.Errorf("unterminated string %.20q", s)
}

// lexVariable reads the Grafana variable at the start of s ($name,
// ${name}, ${name:format}) and returns its length.
func lexVariable(s string) int {
	if strings.HasPrefix(s, "${") {
		if end := strings.IndexByte(s, '}'); end > 0 {
			return end + 1
		}
		return len(s)
	}
	j := 1
	for j < len(s) && isIdentChar(s[j]) && s[j] != ':' {
		j++
	}
	return j
}

// lexOp returns the length of the operator at the start of s, 0 if none.
func lexOp(s string) int {
	for _, op := range []string{"=~", "!~", "!=", "==", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "^", "@"} {
		if strings.HasPrefix(s, op) {
			return len(op)
		}
	}
	return 0
}
