package fenecdb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Several nodes (docs/sdks.md, "Several nodes"; the server's side in
// docs/cluster.md): a cluster's follower refuses a write unrun with 403
// forbidden and the leader's URL in Fenec-Leader, or without it while no
// leader is known.

// headerFenecLeader is the header of a follower's 403 naming the leader
// (openapi.yaml's Forbidden answer).
const headerFenecLeader = "Fenec-Leader"

const (
	// maxFollows bounds the Fenec-Leader answers one call follows.
	maxFollows = 3
	// firstPause and lastPause bound the pause between two full rounds of
	// the configured nodes, doubling from the first to the last.
	firstPause = 50 * time.Millisecond
	lastPause  = time.Second
)

// node is one server a client may send to.
type node struct {
	url   string // without a trailing "/"
	host  string // host:port, for messages
	https bool
}

// nodes are a client's configured servers and the one its calls go to now,
// shared by every copy [Client.Wait] makes — and the highest Fenec-Seq any
// of them answered, sent as Fenec-After on every query and batch given
// several, so that a node the client moves to (a follower, after a
// failover) answers only once it has applied the client's writes
// (read-your-writes, docs/cluster.md).
type nodes struct {
	list    []*node
	current atomic.Pointer[node]
	seq     atomic.Int64
}

// saw remembers a Fenec-Seq answered; only ever upwards.
func (ns *nodes) saw(seq int64) {
	for {
		old := ns.seq.Load()
		if seq <= old || ns.seq.CompareAndSwap(old, seq) {
			return
		}
	}
}

// after returns the Fenec-After to send: none with one URL (a lone server
// answers 400 for one beyond its own writes), or before any write.
func (ns *nodes) after() *int64 {
	if len(ns.list) < 2 {
		return nil
	}
	if s := ns.seq.Load(); s > 0 {
		return &s
	}
	return nil
}

// parseNode reads one server URL; false when it is not one.
func parseNode(raw string) (*node, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, false
	}
	host := u.Host
	if u.Port() == "" {
		host += map[string]string{"http": ":80", "https": ":443"}[u.Scheme]
	}
	return &node{url: strings.TrimRight(raw, "/"), host: host, https: u.Scheme == "https"}, true
}

// parseNodes reads Connect's argument: one URL, or several separated by
// commas (spaces around them are dropped). A bad one is an error naming it
// and its position; duplicates are dropped.
func parseNodes(raw string) (*nodes, error) {
	parts := strings.Split(raw, ",")
	ns := &nodes{}
	seen := map[string]bool{}
	for i, p := range parts {
		if len(parts) > 1 {
			p = strings.TrimSpace(p)
		}
		n, ok := parseNode(p)
		if !ok {
			if len(parts) == 1 {
				return nil, fmt.Errorf("fenecdb: %q is not a server URL: it needs the scheme http or https and a host, as in http://127.0.0.1:8080", raw)
			}
			return nil, fmt.Errorf("fenecdb: node %d of %d: %q is not a server URL: each needs the scheme http or https and a host, as in http://10.0.0.1:8080,http://10.0.0.2:8080", i+1, len(parts), p)
		}
		if !seen[n.url] {
			seen[n.url] = true
			ns.list = append(ns.list, n)
		}
	}
	ns.current.Store(ns.list[0])
	return ns, nil
}

// index returns n's place among the configured nodes; -1 when it is not
// one (a leader a follower named).
func (ns *nodes) index(n *node) int {
	for i, m := range ns.list {
		if m.url == n.url {
			return i
		}
	}
	return -1
}

// dialFailed reports whether err is a connection that could not be made:
// nothing was sent, so the request did not run.
func dialFailed(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// attempt is one request to one node: its answer, or the error it failed
// with.
type attempt func(ctx context.Context, t *apiTransport) (apiReply, error)

// sent is an answer and the node that sent it.
type sent struct {
	apiReply
	host string
}

// walk is one call's way over the configured nodes while the current one
// cannot have run its request: the next URL each time, round robin, and a
// pause after every full round, until the call's deadline.
type walk struct {
	ns         *nodes
	at, misses int
	// follows counts the follows of Fenec-Leader since the last pause (at
	// most maxFollows): a cluster in mid-election, whose follower names a
	// leader that answers no_leader, is paused between follows, not given
	// up while the deadline allows.
	follows       int
	pause         time.Duration
	ctx, deadline context.Context // the caller's, and the call's
	what          string
}

// next returns the node to try after one that failed with last, once the
// pause due (if any) is over.
func (w *walk) next(last error) (*node, error) {
	if w.misses++; w.misses%len(w.ns.list) == 0 {
		if err := w.wait(last); err != nil {
			return nil, err
		}
	}
	return w.step(), nil
}

// step returns the next node in the round, without a pause.
func (w *walk) step() *node {
	n := w.ns.list[w.at%len(w.ns.list)]
	w.at++
	return n
}

// wait pauses (50 ms, doubling to 1 s), and returns last when the call's
// deadline comes first, or the caller's context error when it ends.
func (w *walk) wait(last error) error {
	timer := time.NewTimer(w.pause)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-w.deadline.Done():
		if w.ctx.Err() != nil {
			return fmt.Errorf("fenecdb: %s: %w", w.what, context.Cause(w.ctx))
		}
		return last
	}
	w.pause = min(2*w.pause, lastPause)
	w.follows = 0
	return nil
}

// route sends a request by the rules of docs/sdks.md, "Several nodes", all
// under reqCtx (the call's deadline; ctx is the caller's): to the current
// node; on a 403 naming the leader, the same request to the leader (at
// most maxFollows times between pauses, never from https to http), which
// becomes the current node; on a 503 no_leader, again after a pause, to
// the next node given several, else to the same one; with several nodes
// configured, on a connection that could not be made, or a 403 naming a
// leader whose connection was refused in this call, to the next node,
// pausing between full rounds; until the deadline, which answers the last
// such error.
func (c *Client) route(ctx, reqCtx context.Context, what, bound string, do attempt) (sent, error) {
	ns := c.nodes
	several := len(ns.list) > 1
	n := ns.current.Load()
	w := &walk{ns: ns, at: ns.index(n) + 1, pause: firstPause, ctx: ctx, deadline: reqCtx, what: what}
	var refused map[string]bool // nodes whose connection was refused in this call
	for {
		t := *c.t
		t.baseURL = n.url
		reply, err := do(reqCtx, &t)
		if err != nil {
			failed := sendFailure(ctx, reqCtx, what, n.host, bound, err)
			if !several || ctx.Err() != nil || reqCtx.Err() != nil || !dialFailed(err) {
				return sent{}, failed
			}
			if refused == nil {
				refused = map[string]bool{}
			}
			refused[n.url] = true
			if n, err = w.next(failed); err != nil {
				return sent{}, err
			}
			continue
		}
		if reply.status >= 200 && reply.status <= 299 {
			ns.current.Store(n)
			if seq, err := strconv.ParseInt(reply.header.Get(headerFenecSeq), 10, 64); err == nil {
				ns.saw(seq)
			}
			return sent{reply, n.host}, nil
		}
		e := refusal(n.host, what, reply.status, reply.body)
		if reply.status == 403 && e.Code == CodeForbidden {
			e.Leader = reply.header.Get(headerFenecLeader)
		}
		if e.Leader != "" && !refused[strings.TrimRight(e.Leader, "/")] {
			// Refused unrun: the same request goes to the leader, unless
			// that would be a downgrade from https (the token in clear).
			to, ok := parseNode(e.Leader)
			if !ok || w.follows == maxFollows || (n.https && !to.https) {
				return sent{}, e
			}
			w.follows++
			n = to
			ns.current.Store(n)
			continue
		}
		if e.Code == CodeNoLeader {
			// Refused unrun: no leader known now (an election), or a leader
			// just elected that applies the earlier terms' writes first
			// (docs/cluster.md). Again after the pause: to the next node,
			// or to the same one when it is the only.
			if err := w.wait(e); err != nil {
				return sent{}, err
			}
			if several {
				n = w.step()
			}
			continue
		}
		if several && e.Code == CodeForbidden && e.Leader != "" {
			// A leader named that refused the connection in this call (a
			// follower that has not yet seen it die): another node may
			// know better. A 403 of a token's rules names none: answered.
			if n, err = w.next(e); err != nil {
				return sent{}, err
			}
			continue
		}
		ns.current.Store(n)
		return sent{}, e
	}
}
