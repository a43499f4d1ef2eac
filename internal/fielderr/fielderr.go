// Package fielderr is the error of a configuration field that is invalid:
// the field's path and what is wrong with it, kept apart so that a caller
// can put the field under its own path (a section's "mix" becoming
// "anchors.active.mix") without parsing the message back.
package fielderr

import (
	"errors"
	"fmt"
	"strconv"
)

// Error is an invalid field. Its message is "path: msg", or "path: line
// N: msg" when Line says which line of a document set the field.
type Error struct {
	Path string
	// Line is the document line that set the field; 0 when unknown or
	// when the value did not come from a document.
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return e.Path + ": line " + strconv.Itoa(e.Line) + ": " + e.Msg
	}
	return e.Path + ": " + e.Msg
}

// New returns the error of the field at path, its message formatted.
func New(path, format string, args ...any) *Error {
	return &Error{Path: path, Msg: fmt.Sprintf(format, args...)}
}

// AtLine returns the error of the field at path set at line of a document.
func AtLine(path string, line int, format string, args ...any) *Error {
	return &Error{Path: path, Line: line, Msg: fmt.Sprintf(format, args...)}
}

// Under returns err with its field under prefix ("anchors.active." and
// "mix" give "anchors.active.mix") when err is an *Error, and nil for nil.
// Any other error becomes the error of the field prefix names (its final
// dot dropped), its message err's.
func Under(prefix string, err error) error {
	if err == nil {
		return nil
	}
	var fe *Error
	if errors.As(err, &fe) {
		return &Error{Path: prefix + fe.Path, Line: fe.Line, Msg: fe.Msg}
	}
	path := prefix
	if n := len(path); n > 0 && path[n-1] == '.' {
		path = path[:n-1]
	}
	return &Error{Path: path, Msg: err.Error()}
}

// As returns err's *Error, if it is or wraps one.
func As(err error) (*Error, bool) {
	var fe *Error
	ok := errors.As(err, &fe)
	return fe, ok
}
