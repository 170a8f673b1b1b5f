package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Status is a library status code. Every non-OK value is also an error, so
// errors.Is(err, metrale.ErrNotFound) tells what a call answered.
type Status int

// The statuses of metrale_gpu.h.
const (
	StatusOK            Status = 0
	ErrInvalidArgument  Status = 1
	ErrOutOfMemory      Status = 2
	ErrNotFound         Status = 3
	ErrNoDriver         Status = 4
	ErrNoDevice         Status = 5
	ErrUnsupported      Status = 6
	ErrContextLost      Status = 7
	ErrRedzoneCorrupted Status = 8
	ErrOutOfBounds      Status = 9
	ErrCapture          Status = 10
	ErrBufferTooSmall   Status = 11
	ErrDriver           Status = 12
	ErrInternal         Status = 13
)

// ErrClosed matches (errors.Is) every error from a handle used after it, or
// its context, was closed. Such errors also match ErrInvalidArgument.
var ErrClosed = errors.New("metrale: used after Close")

// Name is the C enumerator's name, e.g. "METRALE_ERROR_NOT_FOUND".
func (s Status) Name() string {
	return C.GoString(C.metrale_status_name(C.metrale_status_t(s)))
}

// Error is the status's name, so a Status is an error too.
func (s Status) Error() string { return s.Name() }

// Error is a failed call: the status and the library's message for it.
type Error struct {
	Status  Status // what the call answered
	Message string // the library's message: what was wrong, where, what to do
	closed  bool
}

// Error is "metrale: STATUS_NAME: message".
func (e *Error) Error() string {
	if e == nil {
		return "metrale: <nil *Error>"
	}
	if e.Message == "" {
		return "metrale: " + e.Status.Name()
	}
	return fmt.Sprintf("metrale: %s: %s", e.Status.Name(), e.Message)
}

// Unwrap gives the Status, so errors.Is(err, metrale.ErrNotFound) works.
func (e *Error) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Status
}

// Is matches ErrClosed for use-after-close errors.
func (e *Error) Is(target error) bool { return e != nil && e.closed && target == ErrClosed }

func closedError(what string) error {
	return &Error{Status: ErrInvalidArgument, Message: what + " was closed", closed: true}
}

func argError(format string, args ...interface{}) error {
	return &Error{Status: ErrInvalidArgument, Message: fmt.Sprintf(format, args...)}
}

// result turns a wrapper's status and copied message into an error.
func result(st C.metrale_status_t, msg *C.char) error {
	if msg != nil {
		defer C.free(unsafe.Pointer(msg))
	}
	if st == C.METRALE_OK {
		return nil
	}
	e := &Error{Status: Status(st)}
	if msg != nil {
		e.Message = C.GoString(msg)
	}
	return e
}
