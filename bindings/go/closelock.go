package metrale

import "sync"

// closeLock is a handle's lock: calls hold it for reading, Close for
// writing. Unlike sync.RWMutex it lets a reader in while a writer only
// waits: a log callback runs inside the call that logged (which holds its
// handles for reading) and may call back into those handles, and with
// sync.RWMutex that nested read waited for a Close that was waiting for the
// outer call: a deadlock. The price: a Close waits as long as calls on the
// handle keep overlapping.
type closeLock struct {
	m       sync.Mutex
	c       sync.Cond // c.L is &m, set by the first waiter
	readers int
	writer  bool
}

func (l *closeLock) wait() {
	if l.c.L == nil {
		l.c.L = &l.m
	}
	l.c.Wait()
}

func (l *closeLock) wake() {
	if l.c.L != nil { // nobody has waited otherwise
		l.c.Broadcast()
	}
}

func (l *closeLock) RLock() {
	l.m.Lock()
	for l.writer {
		l.wait()
	}
	l.readers++
	l.m.Unlock()
}

func (l *closeLock) RUnlock() {
	l.m.Lock()
	l.readers--
	if l.readers == 0 {
		l.wake()
	}
	l.m.Unlock()
}

func (l *closeLock) Lock() {
	l.m.Lock()
	for l.writer || l.readers > 0 {
		l.wait()
	}
	l.writer = true
	l.m.Unlock()
}

func (l *closeLock) Unlock() {
	l.m.Lock()
	l.writer = false
	l.wake()
	l.m.Unlock()
}
