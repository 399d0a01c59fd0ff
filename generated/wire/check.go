package wire

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Encoding never fails: AppendTo trusts its input. Check, generated for every frame, reports the
// values that AppendTo would encode wrongly (a string longer than its length prefix holds, a
// collection larger than its count) so that a sender can refuse them with a clear message.

// ErrLimit is wrapped by every Check failure.
var ErrLimit = errors.New("exceeds protocol limit")

// CheckString reports a string longer than max bytes, or not valid UTF-8 when checkUTF8 is set.
func CheckString(s string, max int, checkUTF8 bool) error {
	if len(s) > max {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrLimit, len(s), max)
	}
	if checkUTF8 && !utf8.ValidString(s) {
		return ErrInvalidUTF8
	}
	return nil
}

// CheckBytes reports a byte field longer than max.
func CheckBytes(b []byte, max int) error {
	if len(b) > max {
		return fmt.Errorf("%w: %d bytes, at most %d allowed", ErrLimit, len(b), max)
	}
	return nil
}

// CheckCount reports a collection with more than max elements.
func CheckCount(n, max int) error {
	if n > max {
		return fmt.Errorf("%w: %d elements, at most %d allowed", ErrLimit, n, max)
	}
	return nil
}

// FieldError locates a Check failure: Path is the field path, such as "messages[3].queue".
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// AtField prefixes err's location with a field name and, when index ≥ 0, an element index.
func AtField(name string, index int, err error) error {
	seg := name
	if index >= 0 {
		seg += "[" + strconv.Itoa(index) + "]"
	}
	var fe *FieldError
	if errors.As(err, &fe) {
		sep := "."
		if strings.HasPrefix(fe.Path, "[") {
			sep = ""
		}
		return &FieldError{Path: seg + sep + fe.Path, Err: fe.Err}
	}
	return &FieldError{Path: seg, Err: err}
}
