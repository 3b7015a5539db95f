package fenecdb

import "time"

// SetAckWindow sets how long w's ack batches stay open, for tests that
// must tell a batch sent when its window ends from one sent sooner.
func SetAckWindow(w *Worker, d time.Duration) { w.ackWindow = d }
