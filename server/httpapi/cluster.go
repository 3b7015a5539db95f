package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fenecdb/fenec/server/engine"
	"github.com/fenecdb/fenec/server/httpapi/gen"
)

// Cluster is a cluster node's side of the API (docs/cluster.md): the
// /_cluster routes, and the end of a leader's term for held claims. Nil
// on a lone server.
type Cluster interface {
	Status() gen.ClusterStatus
	AddMember(id, raftAddr string, voter bool) error
	RemoveMember(id string) error
	Transfer(id string) error
	// TermContext ends when this node's term as leader does.
	TermContext() context.Context
	// NotLeader is the error a write is refused with here now.
	NotLeader() error
}

// afterBound is how long a request waits for the write its Fenec-After
// names (docs/cluster.md).
const afterBound = 5 * time.Second

// maxSeq bounds a Fenec-After as ids are bounded: exact in every JSON
// client (docs/http.md).
const maxSeq = 1<<53 - 1

// Register adds a collector (the cluster's gauges) to the server's
// metrics.
func (m *Metrics) Register(c prometheus.Collector) error { return m.reg.Register(c) }

// after waits until this node has applied the write Fenec-After names:
// 504 behind past afterBound.
func (s *Server) after(r *http.Request) *apiError {
	vs, found := r.Header["Fenec-After"]
	if !found {
		return nil
	}
	// Present, it is one sequence number: an empty or repeated header is
	// refused, never read as no header (openapi.yaml's FenecAfter).
	v := strings.Join(vs, ", ")
	seq, err := strconv.ParseUint(v, 10, 64)
	if len(vs) != 1 || err != nil || seq > maxSeq {
		return badRequest("Fenec-After %q: want a Fenec-Seq, a whole number from 0 to %d", v, maxSeq)
	}
	if s.cfg.Cluster == nil {
		// A lone server makes every write itself: one it has not made is
		// not on its way, and waiting for it would only cost the client
		// afterBound (docs/http.md).
		if last := s.db.Seq(); seq > last {
			return badRequest("Fenec-After %d: this server's last write is %d; a lone server waits for no other node's", seq, last)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(r.Context(), afterBound)
	defer cancel()
	if err := s.db.WaitSeq(ctx, seq); err != nil {
		return newError(gen.ErrorCodeBehind, "Fenec-After %d: this node had not applied that write after %v (it has applied %d)", seq, afterBound, s.db.Seq())
	}
	return nil
}

// heldInTerm runs a held claim under the leader's term: a leader that
// loses it answers its held claims at once, with the refusal a follower
// answers, rather than after their wait.
func (s *Server) heldInTerm(ctx context.Context, hold func(context.Context) ([]*engine.Result, time.Duration, error)) ([]*engine.Result, time.Duration, error) {
	if s.cfg.Cluster == nil {
		return hold(ctx)
	}
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.cfg.Cluster.TermContext(), cancel)
	defer stop()
	rs, took, err := hold(hctx)
	if err != nil && ctx.Err() == nil && hctx.Err() != nil && !errors.Is(err, engine.ErrReplication) {
		// The term ended while it was held, or before it ran: it wrote
		// nothing. (A write the log may still commit keeps its 503.)
		return nil, max(took, time.Nanosecond), s.cfg.Cluster.NotLeader()
	}
	return rs, took, err
}

func (s *Server) clusterOr404(w http.ResponseWriter, r *http.Request, route string) bool {
	if e := fullAccess(r, route); e != nil {
		writeError(w, e)
		return false
	}
	if s.cfg.Cluster == nil {
		writeError(w, newError(gen.ErrorCodeNotFound, "%s: this server is not a cluster node (fenec serve --node-id)", route))
		return false
	}
	return true
}

// ErrNoMember is in the chain of a cluster change naming a node that is
// not a member (or, for a transfer, not a voter): 404.
var ErrNoMember = errors.New("no such member")

func (s *Server) clusterAnswer(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNoMember) {
		writeError(w, newError(gen.ErrorCodeNotFound, "%v", err))
		return
	}
	if err != nil {
		writeError(w, engineError(err, false))
		return
	}
	writeJSON(w, s.cfg.Cluster.Status())
}

// ClusterStatus is GET /_cluster.
func (s *Server) ClusterStatus(w http.ResponseWriter, r *http.Request) {
	if s.clusterOr404(w, r, "GET /_cluster") {
		writeJSON(w, s.cfg.Cluster.Status())
	}
}

// ClusterAddMember is POST /_cluster/members.
func (s *Server) ClusterAddMember(w http.ResponseWriter, r *http.Request) {
	if !s.clusterOr404(w, r, "POST /_cluster/members") {
		return
	}
	var body gen.ClusterMemberAdd
	if err := decodeBody(r, &body); err != nil {
		writeError(w, badRequest("the body: %v", err))
		return
	}
	voter := body.Voter == nil || *body.Voter
	s.clusterAnswer(w, s.cfg.Cluster.AddMember(body.Id, body.RaftAddress, voter))
}

// ClusterRemoveMember is POST /_cluster/remove.
func (s *Server) ClusterRemoveMember(w http.ResponseWriter, r *http.Request) {
	if !s.clusterOr404(w, r, "POST /_cluster/remove") {
		return
	}
	var body gen.ClusterMemberRemove
	if err := decodeBody(r, &body); err != nil {
		writeError(w, badRequest("the body: %v", err))
		return
	}
	s.clusterAnswer(w, s.cfg.Cluster.RemoveMember(body.Id))
}

// ClusterTransferLeader is POST /_cluster/leader.
func (s *Server) ClusterTransferLeader(w http.ResponseWriter, r *http.Request) {
	if !s.clusterOr404(w, r, "POST /_cluster/leader") {
		return
	}
	var body gen.ClusterTransfer
	if err := decodeBody(r, &body); err != nil {
		writeError(w, badRequest("the body: %v", err))
		return
	}
	s.clusterAnswer(w, s.cfg.Cluster.Transfer(deref(body.Id)))
}

// decodeBody decodes a cluster route's body (decodeStrict).
func decodeBody(r *http.Request, v any) error {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		return err
	}
	return decodeStrict(b, v)
}

// decodeStrict decodes one JSON value, keeping numbers exact (UseNumber:
// an int64 must not pass through a float64).
func decodeStrict(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return err
	}
	if _, err := d.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// leaderOf returns the leader a refusal names, for Fenec-Leader.
func leaderOf(err error) (string, bool) {
	var nl *engine.NotLeaderError
	if errors.As(err, &nl) {
		return nl.Leader, true
	}
	return "", false
}
