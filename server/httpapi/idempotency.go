package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// An Idempotency-Key is kept as the engine's side record "idem:<key>",
// committed in the same unit as the write it answered: the key exists
// exactly when the write does, survives a restart with it, and a refused
// write leaves none.
const keyPrefix = metaKind + ":"

// metaKind is the kind of an Idempotency-Key's side record (engine.MetaUse).
const metaKind = "idem"

// fingerprint tells two requests under one key apart: the method, the path,
// the body's bytes and who sent it.
type fingerprint [32]byte

func fingerprintOf(r *http.Request, body []byte) fingerprint {
	h := sha256.New()
	id := identity(r)
	for _, part := range [][]byte{[]byte(r.Method), []byte(r.URL.Path), id[:], body} {
		h.Write(part)
		h.Write([]byte{0})
	}
	var fp fingerprint
	h.Sum(fp[:0])
	return fp
}

func (fp fingerprint) String() string { return hex.EncodeToString(fp[:]) }

// keyRecordBody is a key's record: the request it was used for and the
// answer it got (always a 200: only a successful write keeps its key).
type keyRecordBody struct {
	FP     string          `json:"fp"`
	Status int             `json:"status"`
	Seq    uint64          `json:"seq"`
	Answer json.RawMessage `json:"answer"`
}

func (s *Server) keyRecord(req *request, answer []byte, seq uint64) map[string]engine.Meta {
	b, _ := json.Marshal(keyRecordBody{FP: req.fp.String(), Status: http.StatusOK, Seq: seq, Answer: answer})
	expires := s.db.Clock().NowMS() + s.cfg.IdempotencyTTL.Milliseconds()
	return map[string]engine.Meta{keyPrefix + req.key: {Body: b, Expires: expires}}
}

// lookupKey returns the record of a key still alive. One past its time is
// gone even before the sweeper deletes it. An unreadable record is an
// error, not an absent one: running the write again could do it twice.
// So is a record whose write a cluster's log has not committed: a leader's
// memory holds it from the moment the write runs, and the write's own
// request holds the key's lock until the log answers — but once that
// answer was an error (the leader lost its term: outcome unknown), a
// retry reaching this node before it discards what it did not commit
// would find the record still there. Replaying it would acknowledge a
// write the cluster may never hold (docs/cluster.md, Idempotency-Key);
// the retry is answered the same unknown outcome instead.
func (s *Server) lookupKey(key string) (keyRecordBody, bool, error) {
	m, ok, committed := s.db.GetMetaCommitted(keyPrefix + key)
	if !ok || (m.Expires != 0 && m.Expires <= s.db.Clock().NowMS()) {
		return keyRecordBody{}, false, nil
	}
	var rec keyRecordBody
	if err := json.Unmarshal(m.Body, &rec); err != nil {
		return keyRecordBody{}, false, fmt.Errorf("the record of Idempotency-Key %q is unreadable: %w", key, err)
	}
	if rec.Seq > committed {
		return keyRecordBody{}, false, engine.ReplicationError(
			fmt.Errorf("the write first sent under Idempotency-Key %q (Fenec-Seq %d) is not committed by the cluster's log; this node has committed up to %d", key, rec.Seq, committed),
			"the write was not committed")
	}
	return rec, true, nil
}

// keyLimit refuses a new key while the keys held reach either cap: the
// write is not run, so its retry (refused the same way until older keys
// expire) can never run it twice. Requests in flight may each add one
// record past the cap.
func (s *Server) keyLimit(key string) *apiError {
	// Only the keys' own records count: the change stream's are bounded by
	// --changes-retain* instead (docs/changes.md).
	n, b := s.db.MetaUse(metaKind)
	if n < s.cfg.IdempotencyMaxKeys && b < s.cfg.IdempotencyMaxBytes {
		return nil
	}
	return &apiError{code: gen.ErrorCodeKeyLimit, msg: fmt.Sprintf(
		"Idempotency-Key %q is refused and the write was not run: the server holds %d keys with %d bytes of answers, at its limit (--idempotency-max-keys %d, --idempotency-max-bytes %d); send it again once older keys expire, or without a key",
		key, n, b, s.cfg.IdempotencyMaxKeys, s.cfg.IdempotencyMaxBytes)}
}

// keyLocks serializes the requests that carry one Idempotency-Key.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]*keyLock
}

type keyLock struct {
	mu    sync.Mutex
	users int // requests holding or waiting for mu; the entry goes at 0
}

// lock takes the key's lock and returns its release.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	l := k.held[key]
	if l == nil {
		l = &keyLock{}
		k.held[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.held, key)
		}
		k.mu.Unlock()
	}
}
