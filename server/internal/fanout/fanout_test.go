package fanout

import (
	"slices"
	"sync"
	"testing"
)

// TestList: each subscriber is told every event from when it subscribed
// until it unsubscribed, in order; removing twice, or concurrently with
// telling, is safe.
func TestList(t *testing.T) {
	var l List[int]
	if l.Any() {
		t.Fatal("an empty list has subscribers")
	}
	l.Tell(0) // no one: nothing happens
	var a, b []int
	removeA := l.Add(func(n int) { a = append(a, n) })
	l.Tell(1)
	removeB := l.Add(func(n int) { b = append(b, n) })
	l.Tell(2)
	removeA()
	removeA()
	l.Tell(3)
	removeB()
	l.Tell(4)
	if !slices.Equal(a, []int{1, 2}) || !slices.Equal(b, []int{2, 3}) || l.Any() {
		t.Fatalf("a told %v (want [1 2]), b told %v (want [2 3]), any left: %v", a, b, l.Any())
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	told := 0
	for range 4 {
		wg.Go(func() {
			for range 200 {
				remove := l.Add(func(int) { mu.Lock(); told++; mu.Unlock() })
				l.Tell(5)
				remove()
			}
		})
	}
	wg.Wait()
	if told < 800 {
		t.Fatalf("told %d times, want at least 800 (each its own event)", told)
	}
}
