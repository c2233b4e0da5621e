package fake

import (
	"strings"

	"github.com/paperclip-sandbox/sandbox-plugin/internal/shquote"
	"github.com/paperclip-sandbox/sandbox-plugin/internal/uri"
)

// encodeComponent is JavaScript's encodeURIComponent followed by the
// TypeScript fake provider's replacement of every "%" with "_": A-Z a-z 0-9 and
// -_.!~*'() stay, every other UTF-8 byte becomes _XX (uppercase hex).
func encodeComponent(s string) string { return strings.ReplaceAll(uri.Component(s), "%", "_") }

// commandLine is the quoted line recorded as metadata.commandLine.
func commandLine(command string, args []string) string {
	parts := make([]string, 0, len(args)+1)
	parts = append(parts, shquote.Quote(command))
	for _, a := range args {
		parts = append(parts, shquote.Quote(a))
	}
	return strings.Join(parts, " ")
}
