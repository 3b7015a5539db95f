package fenecdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	mrand "math/rand/v2"
	"runtime"
	"slices"
	"strings"
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
	// OnError is told, as a [*WorkerError], every fault the worker
	// carries on through (a claim, an extension, an ack, a fail or a
	// release that failed), every failed attempt and dead letter, and every
	// lost lease (docs/workers.md, "What is reported"). It is called from
	// the worker's goroutines, possibly at once: it must be safe for that.
	// By default each is logged to Logger: a failed attempt and a fault as
	// a warning, a dead letter and a lost lease as an error.
	OnError func(error)
	// Logger logs what OnError would be told when OnError is nil (default
	// slog.Default()).
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
	db     *Client
	jobs   Query // acks, fails, extends and releases
	claims Query // the claim's where, order and (per claim) limit, held for Wait
	// claimsNow is claims unheld: while claims take jobs, and for
	// RunUntilEmpty, where an empty answer must come at once, not after
	// the wait.
	claimsNow Query
	handler   Handler
	o         WorkerOptions
	claimN    atomic.Int64
	// ackWindow is how long an ack batch stays open (ackWindow, the
	// constant; tests lengthen it).
	ackWindow time.Duration
}

// NewWorker returns a worker for the jobs of coll (db.From("jobs")), a
// collection with the fields run_at (timestamp), owner (text), attempts
// (int) and error (text), as docs/queues.md declares them.
func NewWorker(coll Query, handler Handler, opts WorkerOptions) (*Worker, error) {
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
		o.OnError = func(err error) {
			if logger == nil {
				// Read when logging: a slog.SetDefault made after
				// NewWorker holds too.
				logWorkerError(slog.Default(), err)
				return
			}
			logWorkerError(logger, err)
		}
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
	claims := coll.db.From(coll.name).WhereRaw(Raw("run_at <= now()"))
	if o.Where.text != "" {
		claims = claims.WhereRaw(o.Where)
	}
	claims = claims.Order("run_at")
	w := &Worker{db: coll.db, jobs: coll, handler: handler, o: o, ackWindow: ackWindow,
		claims: claims.on(coll.db.Wait(o.Wait)), claimsNow: claims.on(coll.db.Wait(0))}
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

// on returns c sent through db (a Wait copy of its client).
func (c Query) on(db *Client) Query {
	c.db = db
	return c
}

// WorkerStep names what a worker was doing when it reported a
// [*WorkerError] (docs/workers.md, "What is reported").
type WorkerStep string

// The steps a [*WorkerError] names.
const (
	StepClaim      WorkerStep = "claim"       // a claim failed (it is retried)
	StepExtend     WorkerStep = "extend"      // an extension failed (the next tick tries again)
	StepAck        WorkerStep = "ack"         // an ack failed
	StepFail       WorkerStep = "fail"        // a fail (or a dead letter's write) failed
	StepRelease    WorkerStep = "release"     // a release failed
	StepHandler    WorkerStep = "handler"     // the handler failed; the job runs again after a backoff
	StepDeadLetter WorkerStep = "dead_letter" // the handler failed its last attempt; the job is a dead letter
	StepLostLease  WorkerStep = "lost_lease"  // the job's lease lapsed: it is neither acked nor failed
)

// WorkerError is what a worker reports to [WorkerOptions.OnError]: the
// step, the job it is about (0 when it is about none, as a claim), and
// the cause. Read it with errors.As; errors.Is sees through it to the
// cause (a [*Error], [ErrUnmet], the handler's error).
type WorkerError struct {
	Step  WorkerStep
	JobID int64
	Cause error
}

// Error implements the error interface.
func (e *WorkerError) Error() string {
	var what string
	switch e.Step {
	case StepHandler:
		what = "the handler failed; the job runs again after a backoff"
	case StepDeadLetter:
		what = "the handler failed its last attempt; the job is kept as a dead letter"
	case StepLostLease:
		what = "the lease was lost; the job is neither acked nor failed"
	default:
		what = string(e.Step) + " failed"
	}
	if e.JobID != 0 {
		return fmt.Sprintf("fenecdb worker: job %d: %s: %v", e.JobID, what, e.Cause)
	}
	return fmt.Sprintf("fenecdb worker: %s: %v", what, e.Cause)
}

// Unwrap returns the cause.
func (e *WorkerError) Unwrap() error { return e.Cause }

// logWorkerError is the default OnError: a dead letter and a lost lease
// are errors, the rest (a failed attempt, a fault carried through)
// warnings.
func logWorkerError(logger *slog.Logger, err error) {
	level := slog.LevelWarn
	attrs := []any{"error", err}
	var we *WorkerError
	if errors.As(err, &we) {
		if we.Step == StepDeadLetter || we.Step == StepLostLease {
			level = slog.LevelError
		}
		attrs = []any{"step", string(we.Step), "error", we.Cause}
		if we.JobID != 0 {
			attrs = append(attrs, "job", we.JobID)
		}
	}
	logger.Log(context.Background(), level, "fenecdb worker", attrs...)
}

// report tells OnError.
func (w *Worker) report(step WorkerStep, id int64, cause error) {
	w.o.OnError(&WorkerError{Step: step, JobID: id, Cause: cause})
}

// errorText is what a failed job keeps as its error: the message alone,
// or, when it is empty, the name of the error's type (docs/workers.md).
func errorText(err error) string {
	if msg := err.Error(); msg != "" {
		return msg
	}
	return strings.TrimPrefix(fmt.Sprintf("%T", err), "*")
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
// returned, abandoned when the stop gave it up (then nothing is sent),
// lost when an extension found its lease lost (then nothing is sent
// either); cancel cancels its handler.
type runState struct {
	job       Job
	returned  bool
	abandoned bool
	lost      bool
	ctx       context.Context // the handler's, cancelled by cancel
	cancel    context.CancelFunc
}

// claimAnswer is a claim's outcome.
type claimAnswer struct {
	owner string
	res   Result
	err   error
	// idle: no handler ran when it was sent; ends: the handlers that had
	// ended by then (RunUntilEmpty's test of an empty queue).
	idle bool
	ends int
}

// Run claims and runs jobs until ctx is done, then stops gracefully: it
// claims no more, releases at once the jobs it claimed but has not
// started, gives running handlers the grace period and then cancels them.
// It returns when every job is acked, failed or released, and as soon as
// the running handlers have returned (cancelling ctx from inside a
// handler stops the worker without waiting for the grace); the error is
// ctx's, or a mistake in the worker's statements. A handler that ignores
// its cancelled context is waited for one second more, then given up: Run
// returns an [*AbandonedError] naming those jobs, and their leases lapse.
// Faults on the way (the server down, a timeout, a 5xx) are retried with
// backoff and told to OnError.
//
// At most one claim is in flight; it is sent when at least half the slots
// are free, or when no job runs, and asks for every free slot. It is
// answered at once while the last claim took jobs, and held at the server
// for Wait once one found none. Acks are batched: the jobs whose handlers
// returned within 5 ms (or 100 of them) are acked together, one statement
// per claim, sent at once when no handler is left running — in the
// request of the claim sent then, if it is not held (docs/workers.md).
func (w *Worker) Run(ctx context.Context) error {
	return w.loop(ctx, false)
}

// RunUntilEmpty runs the worker as [Worker.Run] does and returns nil,
// its acks sent, once a claim finds no ready job while no handler runs
// (jobs whose run_at is later are left): for scripts and tests. Its
// claims are not held at the server, so that an empty queue is seen at
// once. Cancelling ctx stops it as it stops Run, with Run's error.
func (w *Worker) RunUntilEmpty(ctx context.Context) error {
	return w.loop(ctx, true)
}

func (w *Worker) loop(ctx context.Context, untilEmpty bool) error {
	// handlers run under their own context, cancelled a grace period
	// after ctx is done.
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		if w.o.Grace < 0 {
			cancelHandlers()
			return
		}
		time.AfterFunc(w.o.Grace, cancelHandlers)
	})
	var leases leaseTicks // the extensions in flight, which end with hctx
	spare := newSpares()
	defer func() {
		stop()
		cancelHandlers()
		leases.close()
		spare.close()
	}()
	acks := w.newAcker(hctx, spare)
	live := &running{jobs: map[*runState]struct{}{}}
	ended := make(chan struct{}, w.o.Concurrency) // a handler returned: its slot is free
	inFlight, ends := 0, 0
	var retry <-chan time.Time // not nil while a fault's backoff runs
	faults := 0
	var fatal error
	// idleSeen: (RunUntilEmpty) a claim found nothing while handlers ran,
	// none of which has ended since it was sent: the next claim waits for
	// one of them to end.
	idleSeen, empty := false, false
	// hold: the last claim found no job, so the next is held at the
	// server; while claims take jobs they are answered at once, and the
	// acks the last running handler's return closed go with them
	// (docs/workers.md, "Claim"). RunUntilEmpty never holds one.
	hold := false
	// drain counts every handler that has returned by now, not just the
	// first: a claim asks for all the free slots.
	drain := func() {
		for {
			select {
			case <-ended:
				inFlight--
				ends++
				idleSeen = false
			default:
				return
			}
		}
	}
	for {
		drain()
		if ctx.Err() != nil || fatal != nil || empty {
			break
		}
		free := w.o.Concurrency - inFlight
		if retry == nil && !idleSeen && free > 0 && (inFlight == 0 || free >= (w.o.Concurrency+1)/2) {
			// The claim is sent from this goroutine: while it is in flight
			// there is nothing else to do but count the handlers that end
			// (ended holds a slot for each), and a stop cancels it (ctx).
			owner := fmt.Sprintf("%s:%d", w.o.OwnerPrefix, w.claimN.Add(1))
			a := claimAnswer{owner: owner, idle: inFlight == 0, ends: ends}
			claim := w.claimsNow
			if hold && !untilEmpty {
				claim = w.claims
			}
			claim = claim.Limit(free)
			// Empty when the claim is held: the loop parked with carry
			// false then (a held claim carries no acks: they would wait
			// for it), so every batch closed went alone.
			carried := acks.carry()
			again := false
			if len(carried) > 0 {
				a.res, again, a.err = acks.withClaim(ctx, claim, w.claimPatch(owner), carried)
			} else {
				a.res, a.err = claim.Update(ctx, w.claimPatch(owner), Returning("*"), noRetries)
			}
			drain()
			if again {
				continue // an ack was refused, and the claim with it: it goes again alone
			}
			if a.err != nil {
				if ctx.Err() != nil {
					// Given up at the stop: the server may have taken jobs
					// for it in that moment, so its owner's jobs go back.
					w.releaseClaim(hctx, a.owner)
					continue
				}
				var fe *Error
				if !errors.As(a.err, &fe) {
					fatal = a.err // a mistake in the statement: no retry mends it
					continue
				}
				faults++
				w.report(StepClaim, 0, a.err)
				retry = time.After(w.o.Backoff(faults))
				continue
			}
			faults = 0
			hold = len(a.res.Rows) == 0
			if len(a.res.Rows) == 0 && untilEmpty {
				switch {
				case a.idle:
					// Nothing ran while it was sent and answered (no other
					// claim was in flight): the queue has no ready job.
					empty = true
				case ends == a.ends:
					// Handlers run, and one may yet fail or release its
					// job: claim again once one has ended.
					idleSeen = true
				}
				// Else a handler ended after the claim was sent, and may
				// have put its job back: claim again now.
				continue
			}
			var sts []*runState
			for _, row := range a.res.Rows {
				job, err := jobOf(row, a.owner)
				if err != nil {
					// Not a queue of docs/queues.md: what this claim took
					// goes back (none of it started), and the worker stops.
					fatal = err
					sts = nil
					w.releaseClaim(hctx, a.owner)
					break
				}
				if ctx.Err() != nil {
					// Stopped: a claimed job not started goes back at once.
					w.release(hctx, job)
					continue
				}
				st := &runState{job: job}
				st.ctx, st.cancel = context.WithCancel(hctx)
				sts = append(sts, st)
			}
			if len(sts) == 0 {
				continue
			}
			// Nothing blocks the loop from here to its next claim (or to
			// its wait for a slot): from now, before any of these jobs can
			// end, a batch closed may wait for that claim.
			if send := acks.park(!untilEmpty && !hold); send != nil {
				spare.Go(send) // none is carried while a claim is in flight
			}
			// Every job joins its claim's lease set before any can leave it.
			lease := w.newLeaseSet(hctx, a.owner, &leases)
			for _, st := range sts {
				lease.add(st)
			}
			acks.start(len(sts))
			for _, st := range sts {
				live.mu.Lock()
				live.jobs[st] = struct{}{}
				live.n++
				live.mu.Unlock()
				inFlight++
				spare.Go(func() {
					defer live.end(st)
					w.run(ctx, hctx, st, lease, &live.mu, acks, ended)
				})
			}
			// Let the handlers just started run before the next claim is
			// weighed: those that return at once free their slots for it,
			// so it asks for them too instead of going out for half. (A
			// few turns: the other threads may be running some of them.)
			for i := 0; i < 3 && inFlight > 0; i++ {
				runtime.Gosched()
				drain()
			}
			continue
		}
		// Waiting for a slot to free: a claim not held goes as soon as
		// one does, and may carry the acks its handler's return closed.
		if send := acks.park(!untilEmpty && !hold && retry == nil); send != nil {
			spare.Go(send) // carried for a claim that did not go
		}
		select {
		case <-ctx.Done():
		case <-ended:
			inFlight--
			ends++
			idleSeen = false
		case <-retry:
			retry = nil
		}
	}
	if send := acks.park(false); send != nil {
		spare.Go(send) // carried for a claim that did not go: not held up by the handlers waited for
	}
	abandoned := live.wait(hctx)
	acks.close() // the batch flushed, and every ack answered
	if len(abandoned) > 0 {
		return &AbandonedError{Jobs: abandoned, Cause: errors.Join(fatal, ctx.Err())}
	}
	if fatal != nil {
		return fatal
	}
	if empty {
		return nil
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

// wait waits for every running job to be acked (its ack handed to the
// acker), failed or released; once hctx is done (the grace is over,
// handlers cancelled) it waits abandonAfter more, then gives up the jobs
// whose handlers have still not returned and returns their ids. A job
// whose handler has returned is waited for: its fail or release is on
// its way.
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
func (w *Worker) mine(job Job) Query {
	return w.jobs.Where("id", job.ID).Where("owner", job.Owner)
}

// leaseSet is the running jobs of one claim, whose leases are extended
// together: one statement per claim every Lease/2, whose answer lists
// the ids it extended. A job missing from it lost its lease. Its
// extensions are sent from a timer's goroutine, so that a set whose jobs
// all return before the first (the usual case) costs no goroutine.
type leaseSet struct {
	w     *Worker
	owner string
	hctx  context.Context
	ticks *leaseTicks
	mu    sync.Mutex
	jobs  map[int64]*runState
	timer *time.Timer // the next extension; stopped when the last job leaves
}

// leaseTicks counts a loop's extensions in flight: the loop waits for
// them when it ends, and none starts after that.
type leaseTicks struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter counts an extension in, or returns false once the loop has ended.
func (t *leaseTicks) enter() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return false
	}
	t.wg.Add(1)
	return true
}

// close stops new extensions and waits for those in flight (they end with
// hctx).
func (t *leaseTicks) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wg.Wait()
}

// newLeaseSet returns the lease set of a claim's jobs, its first
// extension due in Lease/2; they stop when the last job leaves, or with
// hctx.
func (w *Worker) newLeaseSet(hctx context.Context, owner string, ticks *leaseTicks) *leaseSet {
	l := &leaseSet{w: w, owner: owner, hctx: hctx, ticks: ticks, jobs: map[int64]*runState{}}
	l.mu.Lock()
	l.timer = time.AfterFunc(w.o.Lease/2, l.extend)
	l.mu.Unlock()
	return l
}

func (l *leaseSet) add(st *runState) {
	l.mu.Lock()
	l.jobs[st.job.ID] = st
	l.mu.Unlock()
}

// leave takes a job whose handler returned out of the set, and returns
// whether an extension found its lease lost.
func (l *leaseSet) leave(st *runState) (lost bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.jobs, st.job.ID)
	if len(l.jobs) == 0 {
		l.timer.Stop()
	}
	return st.lost
}

// extend extends the leases of the set's jobs, and sets the timer for the
// next extension, Lease/2 after this one began (at once if this one took
// longer).
func (l *leaseSet) extend() {
	if !l.ticks.enter() {
		return
	}
	defer l.ticks.wg.Done()
	if l.hctx.Err() != nil {
		return // cancelled: the jobs' releases, or their giving up, follow
	}
	next := time.Now().Add(l.w.o.Lease / 2)
	l.mu.Lock()
	ids := slices.Sorted(maps.Keys(l.jobs))
	l.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	l.extendOnce(ids)
	l.mu.Lock()
	if len(l.jobs) > 0 {
		l.timer.Reset(max(time.Until(next), 0))
	}
	l.mu.Unlock()
}

// extendOnce sends one extension of the jobs ids; a job missing from its
// answer lost its lease: its handler is cancelled and the loss reported.
// Any other failure is reported, and the next extension tries again.
func (l *leaseSet) extendOnce(ids []int64) {
	res, err := l.w.jobs.WhereOp("id", "in", ids).Where("owner", l.owner).
		Update(l.hctx, D("run_at", Expr("now() + ?", l.w.o.Lease.Milliseconds())), Returning("id"), noRetries)
	if err != nil {
		if l.hctx.Err() == nil {
			for _, id := range ids {
				l.w.report(StepExtend, id, err)
			}
		}
		return
	}
	extended := idsOf(res)
	var lost []*runState
	l.mu.Lock()
	for _, id := range ids {
		if st, ok := l.jobs[id]; ok && !extended[id] {
			// Another claim may have it: hands off.
			st.lost = true
			st.cancel()
			lost = append(lost, st)
		}
	}
	l.mu.Unlock()
	for _, st := range lost {
		l.w.report(StepLostLease, st.job.ID, errLeaseLapsed)
	}
}

// errLeaseLapsed is a lost lease's cause: a statement's answer did not
// list the job.
var errLeaseLapsed = errors.New("the job was no longer this claim's (its lease lapsed; another worker may run it)")

// idsOf returns the ids a returning id statement answered.
func idsOf(res Result) map[int64]bool {
	ids := make(map[int64]bool, len(res.Rows))
	for _, r := range res.Rows {
		if id, ok := r.Get("id").(int64); ok {
			ids[id] = true
		}
	}
	return ids
}

// run runs one job's handler under st.ctx, then hands it to the acker or
// fails or releases it. Its slot is free (ended) when the handler has
// returned and, for a fail or a release, once that is sent.
func (w *Worker) run(stopping, hctx context.Context, st *runState, lease *leaseSet, mu *sync.Mutex, acks *acker, ended chan<- struct{}) {
	var sendAcks func() // the ack batch this job closed, sent once its slot is free
	defer func() {
		ended <- struct{}{}
		if sendAcks != nil {
			sendAcks()
		}
	}()
	defer st.cancel()
	job, jctx := st.job, st.ctx
	err := w.call(jctx, job)
	lost := lease.leave(st)
	mu.Lock()
	abandoned := st.abandoned
	st.returned = true
	mu.Unlock()
	switch {
	case abandoned, lost:
		sendAcks = acks.returned(nil)
		return // Run returned without it, or it is another's: hands off
	case err != nil && stopping.Err() != nil && jctx.Err() != nil:
		// Cancelled after the grace period: back to the queue at once.
		sendAcks = acks.returned(nil)
		w.release(hctx, job)
	case err != nil:
		sendAcks = acks.returned(nil)
		w.fail(hctx, job, err)
	default:
		sendAcks = acks.returned(&job)
	}
}

// call runs the handler, a panic being its error.
func (w *Worker) call(ctx context.Context, job Job) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return w.handler(ctx, job)
}

// fail sends the job back with a backoff, or keeps it as a dead letter,
// and reports which.
func (w *Worker) fail(hctx context.Context, job Job, cause error) {
	text := errorText(cause)
	patch := D("owner", nil, "error", text, "run_at", nil)
	step := StepDeadLetter
	if job.Attempts < int64(w.o.MaxAttempts) {
		delay := w.o.Backoff(int(job.Attempts))
		patch = D("owner", nil, "error", text, "run_at", Expr("now() + ?", delay.Milliseconds()))
		step = StepHandler
	}
	w.report(step, job.ID, cause)
	w.finish(hctx, StepFail, []int64{job.ID}, func(ctx context.Context) error {
		_, err := w.mine(job).Update(ctx, patch, Require(1), noRetries)
		return err
	})
}

// release gives a claimed job back to the queue now, its attempt
// uncounted.
func (w *Worker) release(hctx context.Context, job Job) {
	w.finish(hctx, StepRelease, []int64{job.ID}, func(ctx context.Context) error {
		_, err := w.mine(job).Update(ctx, D("owner", nil, "run_at", Expr("now()"), "attempts", Inc(-1)), Require(1), noRetries)
		return err
	})
}

// releaseClaim gives every job of a claim back to the queue now, their
// attempts uncounted.
func (w *Worker) releaseClaim(hctx context.Context, owner string) {
	w.finish(hctx, StepRelease, nil, func(ctx context.Context) error {
		_, err := w.jobs.Where("owner", owner).Update(ctx, D("owner", nil, "run_at", Expr("now()"), "attempts", Inc(-1)), noRetries)
		return err
	})
}

// spares keeps the goroutines a worker's loop has started for its
// handlers (and the acks they send) parked once their work is done, for
// the next to take up: a goroutine started anew for each job grows its
// stack anew through the HTTP client and encoding/json, which took a
// tenth of a worker's CPU. The parked ones end with the loop.
type spares struct {
	work chan func()
	done chan struct{}
}

func newSpares() *spares {
	return &spares{work: make(chan func()), done: make(chan struct{})}
}

// Go runs f in a parked goroutine, or else in a new one.
func (s *spares) Go(f func()) {
	select {
	case s.work <- f:
	default:
		go s.serve(f)
	}
}

func (s *spares) serve(f func()) {
	for {
		f()
		select {
		case f = <-s.work:
		case <-s.done:
			return
		}
	}
}

// close ends the parked goroutines, and each busy one once its work is
// done.
func (s *spares) close() { close(s.done) }

// ackWindow and ackBatch bound an ack batch: the jobs whose handlers
// returned within ackWindow of the first, or ackBatch of them; a batch
// is sent sooner when no handler is running any more, since no job can
// join it before the next claim answers (docs/workers.md, "Ack, fail,
// dead letter").
const (
	ackWindow = 5 * time.Millisecond
	ackBatch  = 100
)

// acker batches acks: it gathers the jobs whose handlers returned, and
// sends each batch as one del per claim owner, each in a goroutine of its
// own, so that an ack retried through a fault holds up no other.
type acker struct {
	w       *Worker
	hctx    context.Context
	mu      sync.Mutex
	running int // handlers started and not yet returned
	pending []Job
	timer   *time.Timer // armed while pending is not empty
	// carrying: the claim loop is between claims (sending none, waiting
	// on nothing but the handlers and a stop) and its next claim is not
	// held; then a batch the last running handler's return closes is
	// carried: the loop sends it in the request of that claim, or alone
	// if it sends none (docs/workers.md, "Claim").
	carrying bool
	carried  []ownerAcks
	sending  sync.WaitGroup // each owner's acks taken, until it is answered or given up
	spare    *spares
}

// ownerAcks is the acks of one claim owner's jobs: one del.
type ownerAcks struct {
	owner string
	jobs  []Job
}

func (w *Worker) newAcker(hctx context.Context, spare *spares) *acker {
	return &acker{w: w, hctx: hctx, spare: spare}
}

// start counts n handlers about to run.
func (a *acker) start(n int) {
	a.mu.Lock()
	a.running += n
	a.mu.Unlock()
}

// returned counts a handler out and, when job is not nil, queues its
// ack. The batch goes when it is full, when its window ends, or when
// this was the last handler running; when this call closed it, it returns
// what sends it, for the caller to run once its slot is free (nil
// otherwise).
func (a *acker) returned(job *Job) (send func()) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.running--
	if job != nil {
		a.pending = append(a.pending, *job)
	}
	switch {
	case len(a.pending) == 0:
	case a.running == 0 && a.carrying:
		a.carried = append(a.carried, a.takeLocked()...)
	case len(a.pending) >= ackBatch || a.running == 0:
		return a.sender(a.takeLocked())
	case a.timer == nil:
		a.timer = time.AfterFunc(a.w.ackWindow, a.flush)
	}
	return nil
}

// flush sends the pending batch.
func (a *acker) flush() {
	a.mu.Lock()
	send := a.sender(a.takeLocked())
	a.mu.Unlock()
	if send != nil {
		send()
	}
}

// park tells whether the claim loop, between claims, sends its next one
// not held as soon as it may: only then does a batch wait for it. A
// batch already carried keeps waiting if no handler runs: the loop has
// not yet counted the last one's end (its slot is freed after its
// return), and claims once it has. Otherwise park returns what sends
// that batch alone (nil when there is none): the next claim may wait for
// slots, or not go.
func (a *acker) park(carry bool) func() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.carrying = carry
	if carry && a.running == 0 {
		return nil
	}
	return a.sender(a.takeCarried())
}

// carry returns the batch carried for the claim about to be sent; from
// now until the loop parks again, a batch closed is sent at once.
func (a *acker) carry() []ownerAcks {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.carrying = false
	return a.takeCarried()
}

func (a *acker) takeCarried() []ownerAcks {
	c := a.carried
	a.carried = nil
	return c
}

// takeLocked takes the pending batch: one del per claim owner, each
// counted in sending.
func (a *acker) takeLocked() []ownerAcks {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
	var batches []ownerAcks
	for _, j := range a.pending {
		i := slices.IndexFunc(batches, func(b ownerAcks) bool { return b.owner == j.Owner })
		if i < 0 {
			i = len(batches)
			batches = append(batches, ownerAcks{owner: j.Owner})
		}
		batches[i].jobs = append(batches[i].jobs, j)
	}
	a.pending = nil
	a.sending.Add(len(batches))
	return batches
}

// sender returns what sends batches alone (nil when there are none): the
// first from the caller's goroutine, each other from one of its own, so
// that an ack retried through a fault holds up no other.
func (a *acker) sender(batches []ownerAcks) func() {
	if len(batches) == 0 {
		return nil
	}
	return func() {
		for _, b := range batches[1:] {
			a.spare.Go(func() {
				defer a.sending.Done()
				a.send(b.owner, b.jobs)
			})
		}
		defer a.sending.Done()
		a.send(batches[0].owner, batches[0].jobs)
	}
}

// withClaim sends the carried acks and the claim (not held) in one
// request: a /batch of the acks' statements, then the claim's, sent
// whatever ctx (a stop waits for the acks' answer, and the claim is
// answered at once; a claimed job is released after a stop). Each ack's
// answer is handled as a lone ack's, and the claim's is returned. A
// /batch is all or nothing (docs/http.md): if an ack was refused, it is
// reported as a lone ack's refusal, the other acks (undone with it) are
// sent alone, and again is true: the claim did not run either, and is
// sent again alone. Any other failure sends the acks alone, through the
// usual retries, and returns the claim's error (retried as a claim's).
func (a *acker) withClaim(ctx context.Context, claim Query, patch Doc, carried []ownerAcks) (res Result, again bool, err error) {
	stmts := make([]Statement, 0, len(carried)+1)
	ids := make([][]int64, len(carried))
	for i, b := range carried {
		ids[i] = idsIn(b.jobs)
		st, err := a.w.ackOf(b.owner, ids[i]).RenderDelete(Returning("id"))
		if err != nil {
			a.spare.Go(a.sender(carried))
			return Result{}, false, err
		}
		stmts = append(stmts, st)
	}
	st, err := claim.RenderUpdate(patch, Returning("*"))
	if err != nil {
		a.spare.Go(a.sender(carried))
		return Result{}, false, err
	}
	results, err := claim.db.Batch(context.WithoutCancel(ctx), append(stmts, st), noRetries)
	if err != nil {
		var fe *Error
		if errors.As(err, &fe) && !isFault(err) && fe.At >= 0 && fe.At < len(carried) {
			step := StepAck // as finish tells a refusal
			if errors.Is(err, ErrUnmet) {
				step = StepLostLease
			}
			for _, id := range ids[fe.At] {
				a.w.report(step, id, err)
			}
			a.sending.Done()
			if send := a.sender(slices.Delete(carried, fe.At, fe.At+1)); send != nil {
				a.spare.Go(send)
			}
			return Result{}, true, nil
		}
		a.spare.Go(a.sender(carried))
		return Result{}, false, err
	}
	for i := range carried {
		a.acked(ids[i], results[i])
		a.sending.Done()
	}
	return results[len(carried)], false, nil
}

// close sends what is pending or carried and waits for every ack to be
// answered (or given up at the end of the grace period).
func (a *acker) close() {
	a.mu.Lock()
	a.carrying = false
	send := a.sender(append(a.takeLocked(), a.takeCarried()...))
	a.mu.Unlock()
	if send != nil {
		send()
	}
	a.sending.Wait()
}

// send acks jobs, all of one claim: del … where id in $1 and owner = $2
// returning id.
func (a *acker) send(owner string, jobs []Job) {
	ids := idsIn(jobs)
	var res Result
	sent := a.w.finish(a.hctx, StepAck, ids, func(ctx context.Context) (err error) {
		res, err = a.w.ackOf(owner, ids).Delete(ctx, Returning("id"), noRetries)
		return err
	})
	if sent {
		a.acked(ids, res)
	}
}

// acked reports a job missing from its ack's answer: it lost its lease.
func (a *acker) acked(ids []int64, res Result) {
	got := idsOf(res)
	for _, id := range ids {
		if !got[id] {
			a.w.report(StepLostLease, id, errLeaseLapsed)
		}
	}
}

// ackOf picks the jobs ids while the claim owner holds them.
func (w *Worker) ackOf(owner string, ids []int64) Query {
	return w.jobs.WhereOp("id", "in", ids).Where("owner", owner)
}

func idsIn(jobs []Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

// noRetries sends a worker's statement once, whatever the client's
// WithRetries: the worker retries faults itself (docs/workers.md,
// "Faults"), and a key per statement would fill the server's store of
// idempotency keys.
var noRetries = Retries(0)

// isFault reports whether a failed call is worth sending again: no answer
// came (a network error, a timeout) or the server's 5xx (unavailable,
// internal, a proxy's 502), as docs/workers.md's Faults has it. A 4xx is
// the server's refusal of the statement itself, the same the next time.
func isFault(err error) bool {
	var fe *Error
	return errors.As(err, &fe) && (fe.Status == 0 || fe.Status >= 500)
}

// finish sends an ack, a fail or a release about the jobs ids, retrying
// faults with backoff until it is sent or, once the worker is stopping,
// until the grace period ends (hctx): then the jobs' leases lapse and
// another worker runs them. A 412 is a lost lease, reported: the job is
// another's now; any other refusal is reported and not sent again. It
// returns whether the server answered.
func (w *Worker) finish(hctx context.Context, step WorkerStep, ids []int64, send func(context.Context) error) bool {
	tell := func(step WorkerStep, err error) {
		if len(ids) == 0 {
			w.report(step, 0, err)
		}
		for _, id := range ids {
			w.report(step, id, err)
		}
	}
	for try := 1; ; try++ {
		err := send(context.Background())
		switch {
		case err == nil:
			return true
		case errors.Is(err, ErrUnmet):
			tell(StepLostLease, err)
			return false
		case !isFault(err):
			// A refusal (a 4xx) or a mistake: sending it again cannot help.
			tell(step, err)
			return false
		}
		tell(step, fmt.Errorf("try %d: %w", try, err))
		sleep(hctx, w.o.Backoff(try))
		if hctx.Err() != nil {
			return false
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
