package fenecdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Job is a claimed job, as a [Handler] gets it.
type Job struct {
	// Row is the job's row as the claim answered it (returning *).
	Row Row
	// ID is the job's id.
	ID int64
	// Attempts counts this run: 1 on the first.
	Attempts int64
	// Owner is the claim's owner token, <prefix>:<claim counter>.
	Owner string
}

// Handler runs one job. Its context is cancelled when the job's lease is
// lost (another worker may have it now) or when the worker's grace period
// after a stop has passed. A nil answer acks the job; an error fails it,
// and it is run again after a backoff, or, past MaxAttempts, kept as a
// dead letter with the error's text.
type Handler func(ctx context.Context, job Job) error

// WorkerOptions configure [NewWorker]; a zero field takes its default
// (docs/workers.md).
type WorkerOptions struct {
	// Concurrency is how many jobs run at once (default 10).
	Concurrency int
	// Lease is how long a claim holds a job; it is extended every Lease/2
	// while the handler runs (default 30 s; at least 100 ms).
	Lease time.Duration
	// Wait is how long a claim is held at the server while there is no
	// job (default 30 s, at most [MaxWait]; negative: 0, no wait).
	Wait time.Duration
	// MaxAttempts is how many runs a job gets before it is kept as a dead
	// letter (default 5).
	MaxAttempts int
	// Backoff returns how long a job failed attempts times waits before
	// its next run, and how long a fault waits before its retry (default
	// [DefaultBackoff]).
	Backoff func(attempts int) time.Duration
	// Where is an extra condition a job must meet, for a queue field:
	// Raw("queue = ?", "mail") (default none).
	Where Condition
	// OwnerPrefix starts every claim's owner token (default w-<random>).
	OwnerPrefix string
	// Grace is how long running handlers may go on after a stop before
	// they are cancelled (default 30 s; negative: none).
	Grace time.Duration
	// OnError is told every fault the worker carries on through (a claim,
	// an extension, an ack, a fail or a release that failed, a handler's
	// panic) and every lost lease; by default they are logged to Logger.
	OnError func(error)
	// Logger logs faults when OnError is nil (default slog.Default()).
	Logger *slog.Logger
}

// DefaultBackoff is exponential from 1 s, doubling with each attempt, capped
// at 1 h, with full jitter: a random duration from 0 to that.
func DefaultBackoff(attempts int) time.Duration {
	ceiling := time.Hour
	if attempts < 13 {
		ceiling = min(time.Second<<max(attempts-1, 0), time.Hour)
	}
	return time.Duration(mrand.Int64N(int64(ceiling) + 1))
}

// Worker runs a queue's jobs: it claims them, runs each with the handler,
// extends their leases, and acks, fails or dead-letters them
// (docs/workers.md).
type Worker struct {
	db      *Client
	jobs    Collection // acks, fails, extends and releases
	claims  Collection // the claim's where, order and (per claim) limit
	handler Handler
	o       WorkerOptions
	claimN  atomic.Int64
}

// NewWorker returns a worker for the jobs of coll (db.From("jobs")), a
// collection with the fields run_at (timestamp), owner (text), attempts
// (int) and error (text), as docs/queues.md declares them.
func NewWorker(coll Collection, handler Handler, opts WorkerOptions) (*Worker, error) {
	if err := coll.refuse("a worker's collection", "where", "order", "limit", "offset", "select"); err != nil {
		return nil, fmt.Errorf("%w (give NewWorker db.From(name), and a where as WorkerOptions.Where)", err)
	}
	if handler == nil {
		return nil, errors.New("fenecdb: NewWorker: a nil handler")
	}
	o := opts
	if o.Concurrency == 0 {
		o.Concurrency = 10
	}
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Wait == 0 {
		o.Wait = MaxWait
	}
	o.Wait = max(o.Wait, 0)
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.Backoff == nil {
		o.Backoff = DefaultBackoff
	}
	if o.Grace == 0 {
		o.Grace = 30 * time.Second
	}
	if o.OwnerPrefix == "" {
		b := make([]byte, 4)
		rand.Read(b)
		o.OwnerPrefix = "w-" + hex.EncodeToString(b)
	}
	if o.OnError == nil {
		logger := o.Logger
		if logger == nil {
			logger = slog.Default()
		}
		o.OnError = func(err error) { logger.Warn("fenecdb worker", "error", err) }
	}
	switch {
	case o.Concurrency < 0:
		return nil, fmt.Errorf("fenecdb: NewWorker: Concurrency %d is not positive", o.Concurrency)
	case o.Lease < 100*time.Millisecond:
		return nil, fmt.Errorf("fenecdb: NewWorker: Lease %v is under 100ms", o.Lease)
	case o.Wait > MaxWait:
		return nil, fmt.Errorf("fenecdb: NewWorker: Wait %v is over %v", o.Wait, MaxWait)
	case o.MaxAttempts < 1:
		return nil, fmt.Errorf("fenecdb: NewWorker: MaxAttempts %d is not positive", o.MaxAttempts)
	}
	claims := coll.db.Wait(o.Wait).From(coll.name).WhereRaw(Raw("run_at <= now()"))
	if o.Where.text != "" {
		claims = claims.WhereRaw(o.Where)
	}
	w := &Worker{db: coll.db, jobs: coll, claims: claims.Order("run_at"), handler: handler, o: o}
	if _, err := w.claims.Limit(1).RenderUpdate(w.claimPatch(""), Returning("*")); err != nil {
		return nil, fmt.Errorf("fenecdb: NewWorker: the claim: %w", err)
	}
	return w, nil
}

// claimPatch is what a claim writes: the owner token, the lease, the
// attempt counted.
func (w *Worker) claimPatch(owner string) Doc {
	return D("owner", owner, "run_at", Expr("now() + ?", w.o.Lease.Milliseconds()), "attempts", Inc(1))
}

// abandonAfter is how long a stopping worker waits, past the grace period,
// for cancelled handlers to return before it gives their jobs up (their
// leases lapse): the same second as the other SDKs' (docs/workers.md).
const abandonAfter = time.Second

// AbandonedError is what [Worker.Run] returns when handlers that ignore
// their context were still running a second past the grace period: Run
// returned without them, nothing more is sent for their jobs, and their
// leases lapse, so another worker runs them again. It wraps ctx's error.
type AbandonedError struct {
	// Jobs are the ids of the jobs given up, in ascending order.
	Jobs []int64
	// Cause is ctx's error.
	Cause error
}

// Error implements the error interface.
func (e *AbandonedError) Error() string {
	return fmt.Sprintf("fenecdb worker: stopped without %d handler(s) that ignored their cancelled context, of jobs %v: nothing more is sent for them, their leases lapse and another worker runs them again (%v)", len(e.Jobs), e.Jobs, e.Cause)
}

// Unwrap returns ctx's error.
func (e *AbandonedError) Unwrap() error { return e.Cause }

// running is the jobs whose handlers run, for a stop to give up the ones
// that do not return.
type running struct {
	mu   sync.Mutex
	jobs map[*runState]struct{}
	n    int
	idle chan struct{} // closed when n falls to 0 after a stop
}

// runState is one running job's: returned is set when its handler has
// returned, abandoned when the stop gave it up (then nothing is sent).
type runState struct {
	job       Job
	returned  bool
	abandoned bool
}

// Run claims and runs jobs until ctx is done, then stops gracefully: it
// claims no more, releases at once the jobs it claimed but has not
// started, gives running handlers the grace period and then cancels them.
// It returns when every job is acked, failed or released; the error is
// ctx's, or a mistake in the worker's statements. A handler that ignores
// its cancelled context is waited for one second more, then given up: Run
// returns an [*AbandonedError] naming those jobs, and their leases lapse.
// Faults on the way (the server down, a timeout, a 5xx) are retried with
// backoff and told to OnError.
func (w *Worker) Run(ctx context.Context) error {
	// handlers run under their own context, cancelled a grace period
	// after ctx is done.
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	stop := context.AfterFunc(ctx, func() {
		if w.o.Grace < 0 {
			cancelHandlers()
			return
		}
		time.AfterFunc(w.o.Grace, cancelHandlers)
	})
	defer stop()

	live := &running{jobs: map[*runState]struct{}{}}
	free := make(chan struct{}, w.o.Concurrency) // a token per free slot
	for range w.o.Concurrency {
		free <- struct{}{}
	}
	faults := 0
	var fatal error
	for ctx.Err() == nil && fatal == nil {
		// Take one free slot (waiting for it), then every other one free.
		select {
		case <-free:
		case <-ctx.Done():
			continue
		}
		n := 1
		for more := true; more; {
			select {
			case <-free:
				n++
			default:
				more = false
			}
		}
		owner := fmt.Sprintf("%s:%d", w.o.OwnerPrefix, w.claimN.Add(1))
		res, err := w.claims.Limit(n).Update(ctx, w.claimPatch(owner), Returning("*"))
		if err != nil {
			for range n {
				free <- struct{}{}
			}
			if ctx.Err() != nil {
				// Given up at the stop: the server may have taken jobs for
				// it in that moment, so its owner's jobs go back.
				w.releaseClaim(hctx, owner)
				break
			}
			var fe *Error
			if !errors.As(err, &fe) {
				fatal = err // a mistake in the statement: no retry mends it
				break
			}
			faults++
			w.o.OnError(fmt.Errorf("fenecdb worker: claiming: %w", err))
			sleep(ctx, w.o.Backoff(faults))
			continue
		}
		faults = 0
		for i := len(res.Rows); i < n; i++ {
			free <- struct{}{}
		}
		for i, row := range res.Rows {
			job, err := jobOf(row, owner)
			if err != nil {
				// Not a queue of docs/queues.md: what this claim took and
				// did not start goes back, and the worker stops.
				fatal = err
				for range res.Rows[i:] {
					free <- struct{}{}
				}
				w.releaseClaim(hctx, owner)
				break
			}
			if ctx.Err() != nil {
				// Stopped: a claimed job not started goes back at once.
				w.release(hctx, job)
				free <- struct{}{}
				continue
			}
			st := &runState{job: job}
			live.mu.Lock()
			live.jobs[st] = struct{}{}
			live.n++
			live.mu.Unlock()
			go func() {
				defer func() { free <- struct{}{} }()
				defer live.end(st)
				w.run(ctx, hctx, job, st, &live.mu)
			}()
		}
	}
	if abandoned := live.wait(hctx); len(abandoned) > 0 {
		return &AbandonedError{Jobs: abandoned, Cause: errors.Join(fatal, ctx.Err())}
	}
	if fatal != nil {
		return fatal
	}
	return ctx.Err()
}

// end counts a job's goroutine out.
func (r *running) end(st *runState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.jobs, st)
	if st.abandoned {
		return // counted out when it was given up
	}
	r.n--
	if r.n == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
}

// wait waits for every running job to be acked, failed or released; once
// hctx is done (the grace is over, handlers cancelled) it waits
// abandonAfter more, then gives up the jobs whose handlers have still not
// returned and returns their ids. A job whose handler has returned is
// waited for: its ack, fail or release is on its way.
func (r *running) wait(hctx context.Context) []int64 {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return nil
	}
	idle := make(chan struct{})
	r.idle = idle
	r.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-hctx.Done():
	}
	t := time.NewTimer(abandonAfter)
	defer t.Stop()
	select {
	case <-idle:
		return nil
	case <-t.C:
	}
	r.mu.Lock()
	var given []*runState
	for st := range r.jobs {
		if !st.returned {
			st.abandoned = true
			given = append(given, st)
			r.n-- // not waited for: its goroutine ends alone
		}
	}
	if r.n == 0 && r.idle != nil {
		close(r.idle)
		r.idle = nil
	}
	r.mu.Unlock()
	<-idle
	ids := make([]int64, len(given))
	for i, st := range given {
		ids[i] = st.job.ID
	}
	slices.Sort(ids)
	return ids
}

func jobOf(row Row, owner string) (Job, error) {
	id, ok := row.Get("id").(int64)
	attempts, ok2 := row.Get("attempts").(int64)
	if !ok || !ok2 {
		return Job{}, fmt.Errorf("fenecdb worker: a claimed row has no int id and attempts: %v", row.Values)
	}
	return Job{Row: row, ID: id, Attempts: attempts, Owner: owner}, nil
}

// mine picks the job while this claim holds it.
func (w *Worker) mine(job Job) Collection {
	return w.jobs.Where("id", job.ID).Where("owner", job.Owner)
}

// run runs one job: the handler under a context of its own, the lease
// extended every Lease/2, then the ack or the fail.
func (w *Worker) run(stopping, hctx context.Context, job Job, st *runState, mu *sync.Mutex) {
	jctx, cancel := context.WithCancel(hctx)
	defer cancel()
	var lost atomic.Bool
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(w.o.Lease / 2)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-jctx.Done():
				// Cancelled: its release, or its giving up, follows.
				return
			case <-t.C:
			}
			_, err := w.mine(job).Update(context.WithoutCancel(jctx), D("run_at", Expr("now() + ?", w.o.Lease.Milliseconds())), Require(1))
			if errors.Is(err, ErrUnmet) {
				lost.Store(true) // another claim may have it: hands off
				cancel()
				w.o.OnError(fmt.Errorf("fenecdb worker: job %d: the lease was lost; its handler is cancelled, and it is neither acked nor failed: %w", job.ID, err))
				return
			}
			if err != nil {
				w.o.OnError(fmt.Errorf("fenecdb worker: extending job %d: %w", job.ID, err))
			}
		}
	}()
	err := w.call(jctx, job)
	close(done)
	<-exited // an extension in flight lands before the ack or the fail
	mu.Lock()
	abandoned := st.abandoned
	st.returned = true
	mu.Unlock()
	if abandoned {
		return // Run returned without it: its lease lapses
	}
	switch {
	case lost.Load():
		return
	case err != nil && stopping.Err() != nil && jctx.Err() != nil:
		// Cancelled after the grace period: back to the queue at once.
		w.release(hctx, job)
	case err != nil:
		w.fail(hctx, job, err)
	default:
		w.finish(hctx, fmt.Sprintf("acking job %d", job.ID), func(ctx context.Context) error {
			_, err := w.mine(job).Delete(ctx, Require(1))
			return err
		})
	}
}

// call runs the handler, a panic being its error.
func (w *Worker) call(ctx context.Context, job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
			w.o.OnError(fmt.Errorf("fenecdb worker: job %d: %w", job.ID, err))
		}
	}()
	return w.handler(ctx, job)
}

// fail sends the job back with a backoff, or keeps it as a dead letter.
func (w *Worker) fail(hctx context.Context, job Job, cause error) {
	patch := D("owner", nil, "error", cause.Error(), "run_at", nil)
	if job.Attempts < int64(w.o.MaxAttempts) {
		delay := w.o.Backoff(int(job.Attempts))
		patch = D("owner", nil, "error", cause.Error(), "run_at", Expr("now() + ?", delay.Milliseconds()))
	}
	w.finish(hctx, fmt.Sprintf("failing job %d", job.ID), func(ctx context.Context) error {
		_, err := w.mine(job).Update(ctx, patch, Require(1))
		return err
	})
}

// release gives a claimed job back to the queue now, its attempt
// uncounted.
func (w *Worker) release(hctx context.Context, job Job) {
	w.finish(hctx, fmt.Sprintf("releasing job %d", job.ID), func(ctx context.Context) error {
		_, err := w.mine(job).Update(ctx, D("owner", nil, "run_at", Expr("now()"), "attempts", Inc(-1)), Require(1))
		return err
	})
}

// releaseClaim gives every job of a claim back to the queue now, their
// attempts uncounted.
func (w *Worker) releaseClaim(hctx context.Context, owner string) {
	w.finish(hctx, "releasing the jobs of claim "+owner, func(ctx context.Context) error {
		_, err := w.jobs.Where("owner", owner).Update(ctx, D("owner", nil, "run_at", Expr("now()"), "attempts", Inc(-1)))
		return err
	})
}

// isFault reports whether a failed call is worth sending again: no answer
// came (a network error, a timeout) or the server's 5xx (unavailable,
// internal, a proxy's 502), as docs/workers.md's Faults has it. A 4xx is
// the server's refusal of the statement itself, the same the next time.
func isFault(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && (fe.Status == 0 || fe.Status >= 500)
}

// finish sends an ack, a fail or a release, retrying faults with backoff
// until it is sent or, once the worker is stopping, until the grace period
// ends (hctx): then the job's lease lapses and another worker runs it. A
// 412 is a lost lease, reported: the job is another's now; any other
// refusal is reported and not sent again.
func (w *Worker) finish(hctx context.Context, what string, send func(context.Context) error) {
	for try := 1; ; try++ {
		err := send(context.Background())
		switch {
		case err == nil:
			return
		case errors.Is(err, ErrUnmet):
			w.o.OnError(fmt.Errorf("fenecdb worker: %s: the lease was lost: %w", what, err))
			return
		case !isFault(err):
			// A refusal (a 4xx) or a mistake: sending it again cannot help.
			w.o.OnError(fmt.Errorf("fenecdb worker: %s: %w", what, err))
			return
		}
		w.o.OnError(fmt.Errorf("fenecdb worker: %s (try %d): %w", what, try, err))
		sleep(hctx, w.o.Backoff(try))
		if hctx.Err() != nil {
			return
		}
	}
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
