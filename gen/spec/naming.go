package spec

import (
	"regexp"
	"strings"
)

// camelWord is one word of a CamelCase name: a capital and the lower-case letters and digits after it.
var camelWord = regexp.MustCompile(`[A-Z][a-z0-9]*`)

// initialisms are words spelled in capitals in Go names (Go's own convention: ID, not Id).
var initialisms = map[string]string{
	"id": "ID", "api": "API", "acl": "ACL", "dlq": "DLQ", "uuid": "UUID", "utf8": "UTF8",
	"ttl": "TTL", "url": "URL", "http": "HTTP", "tls": "TLS", "json": "JSON", "ok": "Ok",
}

// GoName turns a snake_case or CamelCase spec name into an exported Go identifier:
// request_id → RequestID, api_key → APIKey, QueueNotFound → QueueNotFound.
//
// CamelCase names get the same initialisms word by word: CreateApiKey → CreateAPIKey, SetAcl →
// SetACL, ApiKeyNotFound → APIKeyNotFound (a run of capitals such as HTTPError stays as it is).
func GoName(name string) string {
	if !strings.Contains(name, "_") && name != "" && name[0] >= 'A' && name[0] <= 'Z' {
		return camelWord.ReplaceAllStringFunc(name, func(w string) string {
			if up, ok := initialisms[strings.ToLower(w)]; ok {
				return up
			}
			return w
		})
	}
	var b strings.Builder
	for _, w := range strings.Split(name, "_") {
		if w == "" {
			continue
		}
		if up, ok := initialisms[w]; ok {
			b.WriteString(up)
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]))
		b.WriteString(w[1:])
	}
	return b.String()
}

// GoLocal turns a spec name into an unexported Go identifier (messageID, apiKey).
func GoLocal(name string) string {
	g := GoName(name)
	i := 0
	for i < len(g) && g[i] >= 'A' && g[i] <= 'Z' {
		i++
	}
	switch {
	case i == 0:
		return g
	case i == 1 || i == len(g):
		return strings.ToLower(g[:i]) + g[i:]
	default: // "APIKey" → "apiKey": keep the capital that starts the next word
		return strings.ToLower(g[:i-1]) + g[i-1:]
	}
}
