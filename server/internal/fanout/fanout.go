// Package fanout is the list of subscribers behind the store's and the
// engine's Subscribe: a lower layer tells the layers above it of its
// events through it, without knowing who they are. The list is copied on
// each change, so that telling, which happens on every commit, takes no
// lock.
package fanout

import (
	"sync"
	"sync/atomic"
)

// List is the subscribers to events of type T. The zero value is empty
// and ready to use.
type List[T any] struct {
	mu   sync.Mutex // serialises changes
	subs atomic.Pointer[[]*sub[T]]
}

type sub[T any] struct{ fn func(T) }

// Add has fn told of every event from now on, until the remove it returns
// is called (a second call changes nothing).
func (l *List[T]) Add(fn func(T)) (remove func()) {
	s := &sub[T]{fn: fn}
	l.change(func(list []*sub[T]) []*sub[T] { return append(list, s) })
	var once sync.Once
	return func() {
		once.Do(func() {
			l.change(func(list []*sub[T]) []*sub[T] {
				out := list[:0]
				for _, x := range list {
					if x != s {
						out = append(out, x)
					}
				}
				return out
			})
		})
	}
}

func (l *List[T]) change(f func([]*sub[T]) []*sub[T]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var old []*sub[T]
	if p := l.subs.Load(); p != nil {
		old = *p
	}
	next := f(append([]*sub[T](nil), old...))
	l.subs.Store(&next)
}

// Any returns whether anyone is subscribed now.
func (l *List[T]) Any() bool {
	p := l.subs.Load()
	return p != nil && len(*p) > 0
}

// Tell tells every subscriber of e, in the order they subscribed, on the
// caller's goroutine.
func (l *List[T]) Tell(e T) {
	if p := l.subs.Load(); p != nil {
		for _, s := range *p {
			s.fn(e)
		}
	}
}
