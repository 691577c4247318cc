package cm

import "fmt"

// Error is the error of every decoder in this package: the structure being read
// ("MAD header", "REJ", "IP CM private data", "GSI datagram"), the field as the spec
// names it, and what is wrong with it.
type Error struct {
	Msg     string
	Field   string
	Problem string
}

func (e *Error) Error() string { return "cm: " + e.Msg + ": " + e.Field + ": " + e.Problem }

func fieldError(msg, field, format string, args ...any) *Error {
	return &Error{Msg: msg, Field: field, Problem: fmt.Sprintf(format, args...)}
}

// shortError reports that b holds fewer than want bytes of msg.
func shortError(msg string, got, want int) *Error {
	return fieldError(msg, "length", "%d bytes, want %d", got, want)
}
