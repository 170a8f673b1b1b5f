package metrale

/*
#include "wrappers.h"
*/
import "C"

import (
	"runtime/cgo"
	"sync"
)

// LogLevel is a library log level, lowest first.
type LogLevel int

// The levels of metrale_log_level_t.
const (
	LogTrace    LogLevel = C.METRALE_LOG_TRACE
	LogDebug    LogLevel = C.METRALE_LOG_DEBUG
	LogInfo     LogLevel = C.METRALE_LOG_INFO
	LogWarn     LogLevel = C.METRALE_LOG_WARN
	LogError    LogLevel = C.METRALE_LOG_ERROR
	LogCritical LogLevel = C.METRALE_LOG_CRITICAL
	LogOff      LogLevel = C.METRALE_LOG_OFF
)

// String is the level's METRALE_LOG name ("warn", ...).
func (l LogLevel) String() string {
	names := [...]string{"trace", "debug", "info", "warn", "error", "critical", "off"}
	if l >= 0 && int(l) < len(names) {
		return names[l]
	}
	return "unknown"
}

// SetLogLevel sets the level for every context.
func SetLogLevel(l LogLevel) error {
	var msg *C.char
	if err := result(C.mg_log_set_level(&msg, C.metrale_log_level_t(l)), msg); err != nil {
		return err
	}
	logLevel.Store(int32(l)) // the binding's own lines follow it (finalize.go)
	return nil
}

// The current callback's handle. A line still in flight with an older
// handle is dropped rather than touching a deleted handle.
var (
	logMu     sync.RWMutex
	logHandle cgo.Handle
)

// SetLogCallback sends every library log line to f instead of stderr; nil
// restores stderr. f may run on any goroutine's thread, concurrently. It may
// call this package (lines those calls log go to stderr, not back into f),
// except SetLogCallback (it waits for f to return) and Context.Close (the
// library refuses a destroy from inside the callback). f runs inside the
// call that logged the line, which holds its context (and its handles)
// for reading; f's own calls on them read them again, and get in even
// while a Close of them waits on another goroutine (closelock.go): that
// Close goes on once the logging call returns.
func SetLogCallback(f func(level LogLevel, message string)) {
	var h cgo.Handle
	if f != nil {
		h = cgo.NewHandle(f)
	}
	// The lock is not held across the C call: the library waits there for
	// lines still running the old callback, which hold logMu for reading.
	logMu.Lock()
	old := logHandle
	logHandle = h
	logMu.Unlock()
	C.mg_log_set_handle(C.uintptr_t(h))
	if old != 0 {
		logMu.Lock() // waits for lines still running the old callback
		old.Delete()
		logMu.Unlock()
	}
}

//export metraleGoLog
func metraleGoLog(level C.int, message *C.char, user C.uintptr_t) {
	logMu.RLock()
	defer logMu.RUnlock()
	h := cgo.Handle(user)
	if h == 0 || h != logHandle {
		return
	}
	if f, ok := h.Value().(func(LogLevel, string)); ok {
		f(LogLevel(level), C.GoString(message))
	}
}
